// SPDX-License-Identifier: GPL-2.0
/*
 * What a switch port of the emulated fabric does when its queue fills: ECN marking, packet
 * trimming (MRC/NDP/UET style) and tail drop. Attached at tc clsact egress of every router
 * port, in front of the port's htb shaper (testbed/kernel/shaping.py).
 *
 * The program cannot see the qdisc's backlog, so each port keeps a virtual queue: the bytes it
 * let through, drained at the port's line rate. A switch port fed by one link at line rate never
 * holds more than the packet it is sending, but here packets do not arrive as a link delivers
 * them: the upstream shaper's burst and the receiving CPU's softirq batches hand them over in
 * clumps at veth speed, which a downstream htb absorbs with its own burst and a virtual queue
 * without one would count as a backlog. So a packet enters the virtual queue when the link that
 * fed it would have finished delivering it (no sooner than one serialization time, at that
 * link's rate, after the packet before it on the same link): the virtual queue is a switch
 * port's. For each packet, with A = the bytes queued ahead of it and Q = A + the packet:
 *   - control packets (DSCP CS6: ACK, NACK, probes, trimmed headers) always pass: they are
 *     served first by the shaper, as headers are by an NDP/UET switch;
 *   - an MRC data packet (destination in the uSID block, our header says DATA) with
 *     Q > trim threshold is cut to its headers, flagged TRIMMED, re-marked CS6 so this and
 *     every later port serve it first, and its UDP checksum rewritten;
 *   - any other packet with Q > buffer is dropped (tail drop); on a lossless port
 *     (LOSSLESS flag) `buffer` is the lossless limit instead, far above the scenario's
 *     buffer, and a drop there is counted as an overflow, not as a tail drop;
 *   - an ECN-capable packet that passes is marked CE with RED's profile on A: never at or below
 *     K_min, always above K_max, in between with a probability rising linearly from 0 to P_max
 *     (`mark_ppm`; testbed/kernel/fabric_queue.py has its Python twin).
 * A threshold of 0 turns that behaviour off (K_max for ECN). Per-port counters are read by the
 * telemetry sampler (testbed/kernel/fabric_queue.py mirrors these structs).
 *
 * Ports are keyed by ifindex: the testbed gives every port of the fabric a distinct one, so
 * one program and one pair of maps serve all namespaces.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_PORTS 8192
#define NSEC 1000000000ULL
#define MILLION 1000000ULL

/* hostagent/protocol/wire.py: version 1, type DATA, flag TRIMMED; 40-byte header */
#define WIRE_VERSION 1
#define WIRE_DATA 1
#define WIRE_TRIMMED 0x02
#define WIRE_HEADER 40
/* testbed/fabric/plan.py: uSID blocks are fcbb:bb0p::/32, the first 24 bits name MRC paths */
#define USID_B0 0xfc
#define USID_B1 0xbb
#define USID_B2 0xbb
#define CONTROL_DSCP 48 /* CS6, hostagent/protocol/wire.py CONTROL_DSCP */

#define TRIMMED_LEN (ETH_HLEN + sizeof(struct ipv6hdr) + sizeof(struct udphdr) + WIRE_HEADER)

/* written by the testbed, read here */
struct port_config {
	__u64 rate;   /* bytes per second the port drains, and the link into it delivers */
	__u32 kmin;   /* bytes queued ahead: no ECN mark at or below */
	__u32 kmax;   /* bytes queued ahead: every ECN-capable packet marked above (0: ECN off) */
	__u32 pmax;   /* millionths: the marking probability just below kmax */
	__u32 trim;   /* bytes: trim MRC data above (0: off) */
	__u32 buffer; /* bytes: drop above */
	__u32 flags;  /* LOSSLESS */
};

#define LOSSLESS 1 /* a drop above `buffer` is an overflow of the lossless budget */

/* updated here under the lock, read by the testbed */
struct port_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 queue;   /* virtual queue, bytes */
	__u64 last_ns; /* when it was last drained */
	__u64 fed_ns;  /* when the link into this port finished delivering its last packet */
	__u64 packets, bytes, marked, trimmed, dropped, queue_max, overflow;
};

_Static_assert(sizeof(struct port_config) == 32, "mirrored in testbed/kernel/fabric_queue.py");
_Static_assert(sizeof(struct port_state) == 88, "mirrored in testbed/kernel/fabric_queue.py");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_config);
} port_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct port_state);
} port_state SEC(".maps");

enum verdict { PASS, MARK, TRIM, DROP, OVERFLOW };

/* The IPv6 traffic class: 4 bits in the first byte, 4 in the second. */
static __always_inline __u8 tclass(const struct ipv6hdr *ip6)
{
	const __u8 *b = (const __u8 *)ip6;
	return (b[0] << 4) | (b[1] >> 4);
}

static __always_inline void set_tclass(struct ipv6hdr *ip6, __u8 tc)
{
	__u8 *b = (__u8 *)ip6;
	b[0] = (b[0] & 0xf0) | (tc >> 4);
	b[1] = (b[1] & 0x0f) | (tc << 4);
}

/* The UDP checksum of a trimmed packet, from scratch: pseudo-header, UDP header, our header.
 * (The payload is gone, so the sender's checksum no longer holds.) */
static __always_inline __u16 udp_checksum(struct ipv6hdr *ip6, struct udphdr *udp, void *end)
{
	struct {
		struct in6_addr src, dst;
		__be32 len;
		__be32 next;
		struct udphdr udp;
		__u8 wire[WIRE_HEADER];
	} pseudo = {};
	__u8 *wire = (__u8 *)(udp + 1);

	if ((void *)(wire + WIRE_HEADER) > end)
		return 0;
	pseudo.src = ip6->saddr;
	pseudo.dst = ip6->daddr;
	pseudo.len = bpf_htonl(sizeof(struct udphdr) + WIRE_HEADER);
	pseudo.next = bpf_htonl(IPPROTO_UDP);
	pseudo.udp = *udp;
	pseudo.udp.check = 0;
	__builtin_memcpy(pseudo.wire, wire, WIRE_HEADER);
	__s64 sum = bpf_csum_diff(0, 0, (__be32 *)&pseudo, sizeof(pseudo), 0);
	if (sum < 0)
		return 0;
	__u32 s = (__u32)sum;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	__u16 check = ~s & 0xffff;
	return check ? check : 0xffff;
}

static __always_inline int trim(struct __sk_buff *skb)
{
	if (bpf_skb_change_tail(skb, TRIMMED_LEN, 0))
		return TC_ACT_SHOT; /* could not cut it: it would not fit either */
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	struct udphdr *udp = (void *)(ip6 + 1);
	__u8 *wire = (__u8 *)(udp + 1);
	if ((void *)(wire + WIRE_HEADER) > end)
		return TC_ACT_SHOT;
	ip6->payload_len = bpf_htons(sizeof(struct udphdr) + WIRE_HEADER);
	udp->len = ip6->payload_len;
	wire[3] |= WIRE_TRIMMED; /* flags: a big-endian u16 at offset 2 */
	set_tclass(ip6, (CONTROL_DSCP << 2) | (tclass(ip6) & 3));
	udp->check = udp_checksum(ip6, udp, end);
	return TC_ACT_OK;
}

/* RED's marking probability, in millionths, for `ahead` bytes queued ahead of a packet. */
static __always_inline __u64 mark_ppm(__u64 ahead, __u32 kmin, __u32 kmax, __u32 pmax)
{
	if (!kmax || ahead <= kmin)
		return 0;
	if (ahead > kmax)
		return MILLION;
	return (__u64)pmax * (ahead - kmin) / (kmax - kmin);
}

/* When a packet of `len` bytes that came in through port `in` would have finished arriving
 * over a link: not before `now`, nor before one serialization time at the link's rate after
 * the previous packet it delivered. Rounded up, so a flow at exactly line rate never gains a
 * byte on the queue it feeds. A packet from elsewhere (not a fabric port) arrives `now`. */
static __always_inline __u64 arrival(__u32 in, __u64 len, __u64 now)
{
	struct port_config *cfg = bpf_map_lookup_elem(&port_config, &in);
	struct port_state *st = bpf_map_lookup_elem(&port_state, &in);
	if (!cfg || !st || !cfg->rate)
		return now;
	__u64 wire = (len * NSEC + cfg->rate - 1) / cfg->rate;
	bpf_spin_lock(&st->lock);
	__u64 at = st->fed_ns + wire > now ? st->fed_ns + wire : now;
	st->fed_ns = at;
	bpf_spin_unlock(&st->lock);
	return at;
}

SEC("tc")
int fabric_queue(struct __sk_buff *skb)
{
	__u32 key = skb->ifindex;
	struct port_config *cfg = bpf_map_lookup_elem(&port_config, &key);
	struct port_state *st = bpf_map_lookup_elem(&port_state, &key);
	if (!cfg || !st)
		return TC_ACT_OK;

	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = data + ETH_HLEN;
	if ((void *)(ip6 + 1) > end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK; /* not IPv6 (nothing else crosses the fabric) */

	__u8 tc = tclass(ip6);
	int control = (tc >> 2) == CONTROL_DSCP;
	int ect = (tc & 3) != 0;
	int trimmable = 0;
	if (!control && ip6->nexthdr == IPPROTO_UDP && ip6->daddr.s6_addr[0] == USID_B0 &&
	    ip6->daddr.s6_addr[1] == USID_B1 && ip6->daddr.s6_addr[2] == USID_B2) {
		__u8 *wire = (__u8 *)(ip6 + 1) + sizeof(struct udphdr);
		if ((void *)(wire + 4) <= end)
			trimmable = wire[0] == WIRE_VERSION && wire[1] == WIRE_DATA;
	}

	__u64 len = skb->len;
	__u64 at = arrival(skb->ingress_ifindex, len, bpf_ktime_get_ns()); /* the queue's clock */
	__u64 rate = cfg->rate;
	__u32 trim_at = cfg->trim, buffer = cfg->buffer;
	/* drawn before the lock: no helper may run while it is held */
	__u64 draw = ((__u64)bpf_get_prandom_u32() * MILLION) >> 32;
	enum verdict verdict = PASS;

	bpf_spin_lock(&st->lock);
	__u64 elapsed = at > st->last_ns ? at - st->last_ns : 0;
	__u64 drained = elapsed >= NSEC ? (elapsed / 1000) * rate / 1000000 : elapsed * rate / NSEC;
	st->queue = st->queue > drained ? st->queue - drained : 0;
	if (at > st->last_ns)
		st->last_ns = at;
	__u64 ahead = st->queue, q = ahead + len;
	if (control) {
		verdict = PASS;
	} else if (trimmable && trim_at && q > trim_at) {
		verdict = TRIM;
		len = TRIMMED_LEN;
	} else if (q > buffer) {
		verdict = cfg->flags & LOSSLESS ? OVERFLOW : DROP;
	} else if (ect && draw < mark_ppm(ahead, cfg->kmin, cfg->kmax, cfg->pmax)) {
		verdict = MARK;
	}
	st->packets++;
	if (verdict == DROP) {
		st->dropped++;
	} else if (verdict == OVERFLOW) {
		st->overflow++;
	} else {
		st->queue += len;
		st->bytes += len;
		if (st->queue > st->queue_max)
			st->queue_max = st->queue;
		if (verdict == MARK)
			st->marked++;
		if (verdict == TRIM)
			st->trimmed++;
	}
	bpf_spin_unlock(&st->lock);

	switch (verdict) {
	case DROP:
	case OVERFLOW:
		return TC_ACT_SHOT;
	case TRIM:
		return trim(skb);
	case MARK:
		set_tclass(ip6, tc | 3);
		return TC_ACT_OK;
	default:
		return TC_ACT_OK;
	}
}

char LICENSE[] SEC("license") = "GPL";
