// SPDX-License-Identifier: GPL-2.0
/*
 * SRv6 End with the NEXT-C-SID flavor (RFC 9800; block 32 bits, uSIDs 16 bits) for kernels
 * built without seg6local (CONFIG_IPV6_SEG6_LWTUNNEL unset), where the route
 * `End flavors next-csid lblen 32 nflen 16` is refused. Attached at tc clsact ingress of every
 * router port; the kernel's own IPv6 forwarding does the rest.
 *
 * A packet whose destination starts with the router's block and its uSID, and carries another
 * uSID after it, has the rest of its destination shifted up by one uSID (the freed low 16 bits
 * become zero): fcbb:bb00:<this>:<next>:<host>:: becomes fcbb:bb00:<next>:<host>::. The
 * routing lookup that follows sees the new destination, as after seg6local's End, which also
 * leaves the UDP checksum alone (the checksum covers the carrier the host sent). A destination
 * whose uSID is this router's and whose argument is zero is left to the routing table, which
 * has no route for a router's own SID: it is dropped, as End without an SRH drops it. Each
 * shifted packet is counted per port, what the verification reads where it reads seg6local's
 * per-SID counters (testbed/kernel/usid_end.py mirrors these structs).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define MAX_PORTS 8192
#define DADDR_OFF (ETH_HLEN + 24) /* offsetof(struct ipv6hdr, daddr) */

/* written by the testbed: the SID of the router that owns the port */
struct end_sid {
	__u32 block; /* the locator block, e.g. 0xfcbbbb00 for plane 0 */
	__u32 usid;  /* the router's uSID (16 bits) */
};

struct end_counters {
	__u64 packets;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32); /* ifindex: distinct across the fabric */
	__type(value, struct end_sid);
} end_sid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_PORTS);
	__type(key, __u32);
	__type(value, struct end_counters);
} end_counters SEC(".maps");

SEC("tc")
int usid_end(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if ((void *)(ip6 + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	__u32 key = skb->ifindex;
	struct end_sid *sid = bpf_map_lookup_elem(&end_sid, &key);
	if (!sid)
		return TC_ACT_OK;
	const __u8 *d = ip6->daddr.in6_u.u6_addr8;
	__u32 block = ((__u32)d[0] << 24) | ((__u32)d[1] << 16) | ((__u32)d[2] << 8) | d[3];
	if (block != sid->block || (((__u32)d[4] << 8) | d[5]) != sid->usid)
		return TC_ACT_OK;
	__u8 rest[12] = {};
	__u8 any = 0;
#pragma unroll
	for (int i = 0; i < 10; i++) {
		rest[i] = d[6 + i];
		any |= d[6 + i];
	}
	if (!any)
		return TC_ACT_OK; /* no next uSID: the routing table decides (see above) */
	/* bytes 4..15 of the destination: the next uSIDs up by one, zeros after them */
	if (bpf_skb_store_bytes(skb, DADDR_OFF + 4, rest, sizeof(rest), BPF_F_RECOMPUTE_CSUM))
		return TC_ACT_SHOT;
	struct end_counters *c = bpf_map_lookup_elem(&end_counters, &key);
	if (c)
		__sync_fetch_and_add(&c->packets, 1);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
