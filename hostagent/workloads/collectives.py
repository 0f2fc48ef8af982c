"""Collectives over RDMA WRITE: all-reduce (ring or NCCL's double binary tree), ring all-gather,
ring reduce-scatter, all-to-all (direct or pairwise); algorithms.py says what each algorithm is.

They see the network only through an Endpoint, so the same code runs over MRC, RoCEv2 and the
loopback. Data is float32, reduction is sum. Ring neighbours are rank+1 (right, where this rank
writes) and rank-1 (left, whose writes it waits for).

Blocks: a `count`-element array is cut into `world` blocks as np.array_split cuts it (the first
count % world blocks have one element more), so any count works, even one below the world size
(empty blocks still send a zero-byte WRITE_WITH_IMM, which keeps every rank in step).

Region layout (identical on every rank, fixed by the Communicator's capacity C, in float32
elements; B = ceil(C / world) is the largest block):

    half 0: [ data: world x B ][ slot 0: B ] ... [ slot world-2: B ]
    half 1: the same again

A Communicator built with `trees=True` gives each half a slot area of at least 4 x H elements,
H = ceil(C / 2): tree t's reduction receives child j's partials at slot 2t + j, H wide (each
tree carries one half of the array).

Collective call k uses half k % 2. In it, the data area holds this rank's working array: the
reduced blocks, all-gather blocks written by the left neighbour straight into their final place,
and all-to-all blocks (the one from rank q at q x its block size). Reduce-scatter step s lands in
slot s, because the receiver still needs its own partial sum of that block. So within a call
every byte a peer writes has a place of its own. A tree's broadcast writes the final sums
straight into the child's data area, where the child's own partial was: by then the parent
holds every byte of that partial (its sum came from it), so the child's write of it is done.

Why two halves suffice across calls: a rank finishes call k only once every peer has started
call k (the ring's chain of waits passes through every rank, a tree's broadcast follows its
root's sum of every rank, all-to-all waits for every rank),
so every peer has finished call k-1, the last to use the half that call k+1 writes into. Each
imm is (k mod 2**16) << 16 | step, so a wait cannot be met by an imm of another step or of a
nearby call, even on a transport that remembers imms as a set; the tag wraps after 2**16 calls,
so a transport must forget an imm once a wait has consumed it (the loopback does).
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from hostagent.protocol.endpoint import Endpoint, MessageStats
from hostagent.workloads import algorithms
from hostagent.workloads.algorithms import Algorithm

if TYPE_CHECKING:
    from typing_extensions import Buffer

Kind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
KINDS: tuple[Kind, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
DTYPE = np.dtype(np.float32)
_STEP_BITS = 16  # imm = call tag (high 16 bits) | step (low 16 bits)
MAX_WORLD = 2**(_STEP_BITS - 1)  # all-reduce has 2 x (world - 1) steps
_TREE_STEPS = 4  # a chunk's steps: (up, down) x (tree 0, tree 1)


def registered_region(elements: int) -> np.ndarray:
    """A float32 region as registering it for RDMA leaves it: every page present (ibv_reg_mr
    pins them), so the first collectives into it pay no page faults while they are timed."""
    region = np.zeros(elements, dtype=DTYPE)
    region.fill(0)  # np.zeros maps untouched pages; writing them brings them in now
    return region


def block_bounds(count: int, world: int) -> list[int]:
    """Element offsets where each of the `world` blocks starts, plus `count` at the end."""
    base, extra = divmod(count, world)
    bounds = [0]
    for block in range(world):
        bounds.append(bounds[-1] + base + (block < extra))
    return bounds


class Communicator:
    """One rank's collectives: its registered region and the count of calls made so far.

    Every rank must build it with the same capacity (the largest count it will be called with),
    because a rank computes where to write in a peer's region from its own layout. It registers
    the endpoint's region, which an endpoint allows once: reuse one Communicator for a sweep.
    Given `region` (float32, at least `region_elements` long) it works in that array instead and
    registers nothing: the caller registered a larger region that several Communicators share,
    each over its own endpoint view (hostagent/workloads/steps.py). `trees` reserves the room a
    tree all-reduce needs (see the module's layout); without it a call asking for one is refused.
    `tree_chunk` (elements) fixes the tree's pipeline chunk, NCCL's rule when None
    (algorithms.tree_chunk_bytes).
    """

    def __init__(self, endpoint: Endpoint, capacity: int, *,
                 region: np.ndarray | None = None, trees: bool = False,
                 tree_chunk: int | None = None) -> None:
        if not 1 <= endpoint.world <= MAX_WORLD:
            raise ValueError(f"world {endpoint.world} is outside 1..{MAX_WORLD}")
        if capacity < 0:
            raise ValueError(f"capacity must be at least 0 elements, not {capacity}")
        self.endpoint = endpoint
        self.capacity = capacity
        self.block = -(-capacity // endpoint.world)
        self.trees = trees
        self.tree_slot = -(-capacity // 2)
        self.half = self.region_elements(endpoint.world, capacity, trees=trees) // 2
        if tree_chunk is not None and tree_chunk < 1:
            raise ValueError(f"tree_chunk must be at least 1 element, not {tree_chunk}")
        self.tree_chunk = tree_chunk
        if trees:
            chunk = tree_chunk or algorithms.tree_chunk_bytes(0, 1) // DTYPE.itemsize  # smallest
            if -(-self.tree_slot // chunk) * _TREE_STEPS >= 2**_STEP_BITS:
                raise ValueError(f"capacity {capacity} is too large for a tree all-reduce: "
                                 f"its chunks would need more than {2**_STEP_BITS} steps")
        if region is None:
            self._region = registered_region(2 * self.half)
            # numpy's stubs declare the buffer protocol for Python 3.12+ only (mypy checks 3.11)
            endpoint.register(memoryview(cast("Buffer", self._region)).cast("B"))
        else:
            if region.dtype != DTYPE or region.ndim != 1 or region.size < 2 * self.half:
                raise ValueError(f"region must be float32[>= {2 * self.half}], not "
                                 f"{region.dtype}{list(region.shape)}")
            self._region = region
        self._calls = 0
        self._running = False
        self._messages: list[MessageStats] = []

    @staticmethod
    def region_elements(world: int, capacity: int, *, trees: bool = False) -> int:
        """float32 elements of the region a Communicator of `world` ranks and `capacity` uses."""
        block = -(-capacity // world)
        slots = max((world - 1) * block, 4 * -(-capacity // 2) if trees else 0)
        return 2 * (world * block + slots)

    def input_size(self, kind: Kind, count: int) -> int:
        """Elements this rank passes in: its own block for all-gather, the whole array otherwise."""
        if kind != "all_gather":
            return count
        bounds = block_bounds(count, self.endpoint.world)
        return bounds[self.endpoint.rank + 1] - bounds[self.endpoint.rank]

    def output_size(self, kind: Kind, count: int) -> int:
        """Elements this rank gets back: its own block for reduce-scatter, a block from every
        rank for all-to-all, the whole array otherwise."""
        if kind in ("all_reduce", "all_gather"):
            return count
        bounds = block_bounds(count, self.endpoint.world)
        mine = bounds[self.endpoint.rank + 1] - bounds[self.endpoint.rank]
        return mine if kind == "reduce_scatter" else self.endpoint.world * mine

    async def run(self, kind: Kind, send: np.ndarray, count: int,
                  out: np.ndarray | None = None, algorithm: Algorithm | None = None
                  ) -> np.ndarray:
        """Run one collective over a `count`-element array; returns a fresh array (this rank's
        block for reduce-scatter, its n blocks from all ranks for all-to-all, else all `count`),
        or fills `out` (float32[output_size]) and returns it: a loop of calls reuses one.
        Every rank must make the same calls, with the same algorithm (the collective's default
        when None), in the same order."""
        chosen = self._check(kind, send, count, algorithm)
        if out is not None:
            _check_shape(f"{kind} of {count} elements on rank {self.endpoint.rank} returns", out,
                         self.output_size(kind, count))
        result = await self._run(kind, chosen, send, count)
        if out is None:  # the region's half is written again two calls later
            return result.copy()
        np.copyto(out, result)
        return out

    async def run_in_place(self, kind: Kind, send: np.ndarray, count: int,
                           algorithm: Algorithm | None = None) -> np.ndarray:
        """`run`, returning the result where the collective left it: a read-only view of the
        region, valid until this Communicator's next call starts (peers write this half again
        only in the call after it). A caller that reads the result once before its next call,
        as a verifying loop does, is spared copying megabytes (and bringing in their pages)."""
        chosen = self._check(kind, send, count, algorithm)
        view = (await self._run(kind, chosen, send, count)).view()
        view.flags.writeable = False
        return view

    def _check(self, kind: Kind, send: np.ndarray, count: int,
               algorithm: Algorithm | None) -> Algorithm:
        if kind not in KINDS:
            raise ValueError(f"unknown collective {kind!r}; known: {', '.join(KINDS)}")
        chosen = algorithms.default(kind) if algorithm is None else algorithm
        algorithms.check(kind, chosen)
        if chosen not in algorithms.AVAILABLE[kind]:  # only `auto` passes check() and not this
            raise ValueError("`auto` is chosen per size before the call (algorithms.choose)")
        if chosen == "tree" and not self.trees:
            raise ValueError("this Communicator was built without room for trees (trees=True)")
        if not 0 <= count <= self.capacity:
            raise ValueError(f"count {count} is outside 0..{self.capacity} (the capacity)")
        _check_shape(f"{kind} of {count} elements on rank {self.endpoint.rank} takes", send,
                     self.input_size(kind, count))
        if self._running:
            raise RuntimeError("one collective at a time: every rank must run them in order")
        return chosen

    async def _run(self, kind: Kind, algorithm: Algorithm, send: np.ndarray,
                   count: int) -> np.ndarray:
        call = _Call(self, count)
        self._calls += 1
        self._running = True
        try:
            return await _ALGORITHMS[kind, algorithm](call, np.ascontiguousarray(send))
        finally:
            call.abandon()
            self._running = False

    def take_messages(self) -> list[MessageStats]:
        """The stats of every write since the last take, so a driver can tag them per call."""
        messages, self._messages = self._messages, []
        return messages


def _check_shape(what: str, array: np.ndarray, size: int) -> None:
    if array.dtype != DTYPE or array.shape != (size,):
        raise ValueError(f"{what} float32[{size}], not {array.dtype}{list(array.shape)}")


class _Call:
    """One collective call: its half of the region, its blocks and its imm numbering."""

    def __init__(self, comm: Communicator, count: int) -> None:
        self.endpoint = comm.endpoint
        self.rank, self.world = comm.endpoint.rank, comm.endpoint.world
        self.right, self.left = (self.rank + 1) % self.world, (self.rank - 1) % self.world
        self.count = count
        self.bounds = block_bounds(count, self.world)
        self.region = comm._region
        self.data_at = (comm._calls % 2) * comm.half  # element offsets, same in every region
        self.slots_at = self.data_at + self.world * comm.block
        self.slot_size = comm.block
        self.tree_slot = comm.tree_slot
        self.tree_chunk = comm.tree_chunk
        self.data = self.region[self.data_at:self.slots_at]
        self._tag: int = (comm._calls % 2**_STEP_BITS) << _STEP_BITS
        self._comm = comm
        self._writes: list[asyncio.Future[MessageStats]] = []

    def block(self, index: int) -> slice:
        return slice(self.bounds[index], self.bounds[index + 1])

    def block_size(self, index: int) -> int:
        return self.bounds[index + 1] - self.bounds[index]

    def imm(self, step: int) -> int:
        return self._tag | step

    def write(self, peer: int, source: np.ndarray, remote_element: int,
              step: int) -> asyncio.Future[MessageStats]:
        """Start the write; its stats go to the call's messages when it completes. The IO
        driver's write is a future already: no task is made for it."""
        write = asyncio.ensure_future(self.endpoint.write(
            peer, memoryview(cast("Buffer", source)).cast("B"), remote_element * DTYPE.itemsize,
            self.imm(step)))
        write.add_done_callback(self._record)
        return write

    def _record(self, write: asyncio.Future[MessageStats]) -> None:
        if not write.cancelled() and write.exception() is None:
            self._comm._messages.append(write.result())

    def send(self, peer: int, source: np.ndarray, remote_element: int, step: int) -> None:
        """Start a write that `drain` collects. The caller goes on without its acknowledgement
        (a round trip of idle link per step otherwise): its source is not modified again until
        the peer has all of it."""
        self._writes.append(self.write(peer, source, remote_element, step))

    async def ring_step(self, step: int, source: np.ndarray, remote_element: int) -> None:
        """Start the write to the right neighbour and wait for the left one's write of the same
        step."""
        self.send(self.right, source, remote_element, step)
        await self.endpoint.wait_imm(self.left, self.imm(step))

    def abandon(self) -> None:
        """Writes still in flight when the call ends early (a failure, a stop): the call's own
        error says how it ended, so they are cancelled and their errors consumed (asyncio would
        log each one as never retrieved, after the agent's last line). A no-op after `drain`."""
        for write in self._writes:
            if not write.done():
                write.cancel()
            elif not write.cancelled():
                write.exception()
        self._writes = []

    async def drain(self) -> None:
        """Until every write of this call is acknowledged (a failure raises here)."""
        writes, self._writes = self._writes, []
        await asyncio.gather(*writes)


async def _ring_reduce_scatter(call: _Call) -> None:
    """Sum every rank's data area into block `rank` of this rank's (the others become partial).

    At step s this rank passes on its partial of block rank-s-1 and adds the left neighbour's
    partial of block rank-s-2, so after world-1 steps block `rank` holds all contributions."""
    for step in range(call.world - 1):
        sent = (call.rank - step - 1) % call.world
        received = (call.rank - step - 2) % call.world
        slot = call.slots_at + step * call.slot_size
        await call.ring_step(step, call.data[call.block(sent)], slot)
        call.data[call.block(received)] += call.region[slot:slot + call.block_size(received)]


async def _ring_all_gather(call: _Call, first_step: int) -> None:
    """Spread each rank's block `rank` to every rank: at step s this rank forwards block rank-s
    into the same place of the right neighbour's data area (no copy at the receiver)."""
    for step in range(call.world - 1):
        sent = (call.rank - step) % call.world
        await call.ring_step(first_step + step, call.data[call.block(sent)],
                             call.data_at + call.bounds[sent])


async def _all_reduce(call: _Call, send: np.ndarray) -> np.ndarray:
    call.data[:call.count] = send
    await _ring_reduce_scatter(call)
    await _ring_all_gather(call, first_step=call.world - 1)
    await call.drain()
    return call.data[:call.count]


async def _reduce_scatter(call: _Call, send: np.ndarray) -> np.ndarray:
    call.data[:call.count] = send
    await _ring_reduce_scatter(call)
    await call.drain()
    return call.data[call.block(call.rank)]


async def _all_gather(call: _Call, send: np.ndarray) -> np.ndarray:
    call.data[call.block(call.rank)] = send
    await _ring_all_gather(call, first_step=0)
    await call.drain()
    return call.data[:call.count]


async def _all_to_all(call: _Call, send: np.ndarray) -> np.ndarray:
    """Every rank writes its block p straight to rank p, all peers at once; rank p keeps the
    block from rank q at q x (its own block size), so the result is the blocks in rank order."""
    mine = call.block_size(call.rank)
    peers = [p for p in range(call.world) if p != call.rank]
    call.data[call.rank * mine:(call.rank + 1) * mine] = send[call.block(call.rank)]
    await asyncio.gather(
        *(call.write(p, send[call.block(p)], call.data_at + call.rank * call.block_size(p), 0)
          for p in peers),
        *(call.endpoint.wait_imm(p, call.imm(0)) for p in peers))
    return call.data[:call.world * mine]


async def _pairwise_all_to_all(call: _Call, send: np.ndarray) -> np.ndarray:
    """The blocks of `_all_to_all`, placed alike, written one peer a round (algorithms.py)."""
    mine = call.block_size(call.rank)
    call.data[call.rank * mine:(call.rank + 1) * mine] = send[call.block(call.rank)]
    for step, (to, source) in enumerate(algorithms.pairwise_rounds(call.world, call.rank)):
        call.send(to, send[call.block(to)], call.data_at + call.rank * call.block_size(to), step)
        await call.endpoint.wait_imm(source, call.imm(step))
    await call.drain()
    return call.data[:call.world * mine]


async def _tree_all_reduce(call: _Call, send: np.ndarray) -> np.ndarray:
    """NCCL's double binary tree: tree t reduces and broadcasts half t of the array, both at
    once, each pipelined in chunks."""
    call.data[:call.count] = send
    halves = block_bounds(call.count, 2)
    depth = algorithms.tree_depth(call.world)
    await asyncio.gather(*(
        _tree(call, t, node, range(halves[t], halves[t + 1]), depth)
        for t, node in enumerate(algorithms.double_tree(call.world, call.rank))))
    await call.drain()
    return call.data[:call.count]


async def _tree(call: _Call, tree: int, node: algorithms.TreeNode, elements: range,
                depth: int) -> None:
    """One tree's half: chunks go up (wait for the children's partials, add them, pass the sum
    to the parent) and come down (wait for the parent's final sums, pass them on) at once, so
    chunk i+1 climbs while chunk i descends. At least one chunk, possibly empty, keeps every
    rank in step when the half is empty."""
    size = call.tree_chunk or (algorithms.tree_chunk_bytes(len(elements) * DTYPE.itemsize, depth)
                               // DTYPE.itemsize)
    chunks = [range(lo, min(lo + size, elements.stop))
              for lo in range(elements.start, max(elements.stop, elements.start + 1), size)]
    parent = node.parent
    slot_of = 0  # where this rank's partials go in the parent's region
    if parent is not None:
        siblings = algorithms.double_tree(call.world, parent)[tree].children
        slot_of = call.slots_at + (2 * tree + siblings.index(call.rank)) * call.tree_slot

    def step(chunk: int, down: bool) -> int:
        return (chunk * 2 + tree) * 2 + down

    async def up() -> None:
        for i, chunk in enumerate(chunks):
            part = call.data[chunk.start:chunk.stop]
            await asyncio.gather(*(call.endpoint.wait_imm(c, call.imm(step(i, False)))
                                   for c in node.children))
            offset = chunk.start - elements.start
            for j, _ in enumerate(node.children):
                slot = call.slots_at + (2 * tree + j) * call.tree_slot + offset
                part += call.region[slot:slot + len(chunk)]
            if parent is not None:
                call.send(parent, part, slot_of + offset, step(i, False))
            else:
                for child in node.children:  # the root's sums are final: down they go
                    call.send(child, part, call.data_at + chunk.start, step(i, True))

    async def down(parent: int) -> None:
        for i, chunk in enumerate(chunks):
            await call.endpoint.wait_imm(parent, call.imm(step(i, True)))
            for child in node.children:
                call.send(child, call.data[chunk.start:chunk.stop], call.data_at + chunk.start,
                          step(i, True))

    if parent is None:
        await up()
    else:
        await asyncio.gather(up(), down(parent))


# Each returns its result as a view of the region, which `run` copies out.
_ALGORITHMS: dict[tuple[str, Algorithm], Callable[[_Call, np.ndarray], Awaitable[np.ndarray]]] = {
    ("all_reduce", "ring"): _all_reduce,
    ("all_reduce", "tree"): _tree_all_reduce,
    ("all_gather", "ring"): _all_gather,
    ("reduce_scatter", "ring"): _reduce_scatter,
    ("all_to_all", "direct"): _all_to_all,
    ("all_to_all", "pairwise"): _pairwise_all_to_all,
}
