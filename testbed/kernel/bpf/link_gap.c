// SPDX-License-Identifier: GPL-2.0
/*
 * Mininet-HiFi's link invariant, measured in the kernel: a backlogged link sends its next
 * packet one serialization time after the last. Attached to the `qdisc:qdisc_dequeue`
 * tracepoint (as a raw tracepoint: no tracefs needed, no per-event record), it sees every
 * packet a root qdisc hands to its device. For the ports the testbed registered (`gap_config`:
 * rate and full packet size), it keeps a virtual link: the time the port would finish sending
 * what it has dequeued so far, `free = max(free, now) + len / rate`. When the previous dequeue
 * left packets waiting, the next one should come by `free`; how much later it came, in full
 * packet times, lands in a per-port histogram (`gap_state`). Nothing goes to user space per
 * packet: the testbed reads the histograms once, after the traffic
 * (testbed/kernel/link_gap.py mirrors the structs).
 *
 * Why a virtual link rather than consecutive gaps alone: htb lets a class within its own
 * assured rate send at once (the control class's ACKs overtake a data packet still "on the
 * wire"), and its burst lets a backlog start early; gaps of mixed-size packets then differ from
 * one serialization time on an idle CPU. Early is not a fidelity problem (the line rate over
 * the busy period holds); late is: the link idled while it had work, the CPU set the pace.
 * `max(free, now)` restarts the clock at every late packet, so a shaper a percent slow
 * never accumulates into a false alarm.
 */
#include <linux/bpf.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#define MAX_PORTS 8192
#define NSEC 1000000000ULL
#define BUCKETS 18

/* Just the kernel fields read here; CO-RE relocates them against the running kernel's BTF. */
struct sk_buff {
	unsigned int len;
} __attribute__((preserve_access_index));
struct qdisc_skb_head {
	__u32 qlen;
} __attribute__((preserve_access_index));
struct Qdisc {
	struct qdisc_skb_head q;
} __attribute__((preserve_access_index));
struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));
struct netdev_queue {
	struct net_device *dev;
} __attribute__((preserve_access_index));

/* Upper edges of the histogram's buckets: lateness in hundredths of a percent of a full packet
 * time; the first bucket holds on-time (and early) dequeues, the last everything from 10000% up. Mirrored in testbed/kernel/link_gap.py. */
static const __u64 edges[BUCKETS - 1] = {
	100, 200, 500, 1000, 2000, 3000, 5000, 7000, 10000, 15000, 20000, 30000, 50000,
	100000, 200000, 500000, 1000000,
};

/* written by the testbed */
struct gap_config {
	__u64 rate;   /* bits per second the port's shaper sends */
	__u32 packet; /* bytes of a full-size frame: the unit of lateness */
	__u32 pad;
};

struct gap_state {
	__u64 free_ns;      /* when the virtual link finishes what was dequeued */
	__u64 last_ns;      /* the previous dequeue */
	__u32 last_backlog; /* packets the root qdisc still held after it */
	__u32 pad;
	__u64 dequeues;     /* packets dequeued */
	__u64 backlogged;   /* dequeues measured (the previous one left a backlog) */
	__u64 gap_ns;       /* sum of their gaps since the previous dequeue */
	__u64 late_ns;      /* sum of their lateness against the virtual link */
	__u64 bulk;         /* dequeues of several packets at once (not measured) */
	__u64 hist[BUCKETS];
};

_Static_assert(sizeof(struct gap_config) == 16, "mirrored in link_gap.py");
_Static_assert(sizeof(struct gap_state) == 64 + 8 * BUCKETS, "mirrored in link_gap.py");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct gap_config);
} gap_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct gap_state);
} gap_state SEC(".maps");

/* TP_PROTO(struct Qdisc *qdisc, const struct netdev_queue *txq, int packets,
 *          struct sk_buff *skb). A root qdisc's dequeue runs under its running bit, one CPU at a
 * time per port, so the per-port state needs no lock. */
SEC("raw_tp/qdisc_dequeue")
int link_gap(struct bpf_raw_tracepoint_args *ctx)
{
	struct Qdisc *qdisc = (struct Qdisc *)ctx->args[0];
	struct netdev_queue *txq = (struct netdev_queue *)ctx->args[1];
	int packets = (int)ctx->args[2];
	struct sk_buff *skb = (struct sk_buff *)ctx->args[3];
	if (!skb || packets <= 0)
		return 0; /* nothing dequeued (htb throttled): not a departure */

	__u32 key = BPF_CORE_READ(txq, dev, ifindex);
	struct gap_config *cfg = bpf_map_lookup_elem(&gap_config, &key);
	struct gap_state *st = bpf_map_lookup_elem(&gap_state, &key);
	if (!cfg || !st || !cfg->rate || !cfg->packet)
		return 0; /* not a port of the fabric */

	__u64 now = bpf_ktime_get_ns();
	__u64 len = BPF_CORE_READ(skb, len);
	__u32 backlog = BPF_CORE_READ(qdisc, q.qlen);
	__u64 unit = (__u64)cfg->packet * 8 * NSEC / cfg->rate; /* one full packet's time */
	st->dequeues += packets;
	if (packets > 1) {
		st->bulk++; /* a batch: its packets' times are not their own */
	} else if (st->last_ns && st->last_backlog && unit) {
		__u64 late = now > st->free_ns ? now - st->free_ns : 0;
		__u64 err = late * 10000 / unit; /* hundredths of a percent of a packet time */
		__u32 b = BUCKETS - 1;
#pragma unroll
		for (int i = BUCKETS - 2; i >= 0; i--)
			if (err < edges[i])
				b = i;
		if (b < BUCKETS)
			st->hist[b]++;
		st->backlogged++;
		st->gap_ns += now - st->last_ns;
		st->late_ns += late;
	}
	/* the virtual link: busy until free_ns, then sending this packet */
	st->free_ns = (st->free_ns > now ? st->free_ns : now) + len * 8 * NSEC / cfg->rate;
	st->last_ns = now;
	st->last_backlog = packets > 1 ? 0 : backlog;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
