"""The one netlink message pyroute2 cannot build: seg6local End with the NEXT-C-SID flavor.

pyroute2 0.9 knows seg6local actions but has no attribute for flavors (`SEG6_LOCAL_FLAVORS`,
what iproute2 writes as `flavors next-csid lblen 32 nflen 16`) nor for per-SID counters
(`SEG6_LOCAL_COUNTERS`). Rather than spawning `ip` per route, this module extends pyroute2's
own message class with both attributes (numbers from linux/seg6_local.h) and sends it over
the same netlink socket. Counters are what the verification reads to prove a probe was
processed by the router that owns the SID.
"""
from __future__ import annotations

import socket
from ipaddress import IPv6Network

from pyroute2.netlink import NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, nla
from pyroute2.netlink.rtnl import RTM_NEWROUTE
from pyroute2.netlink.rtnl.rtmsg import rtmsg

LWTUNNEL_ENCAP_SEG6_LOCAL = 7
SEG6_LOCAL_FLV_OP_NEXT_CSID = 4
RT_TABLE_MAIN = 254
RTPROT_STATIC = 4
RTN_UNICAST = 1


class csid_rtmsg(rtmsg):
    """rtmsg whose seg6local encap also carries counters and flavors."""

    class seg6local_csid_info(rtmsg.seg6local_encap_info):
        nla_map = rtmsg.seg6local_encap_info.nla_map + (
            ("SEG6_LOCAL_COUNTERS", "counters"),
            ("SEG6_LOCAL_FLAVORS", "flavors"),
        )

        class counters(nla):
            nla_map = (
                ("SEG6_LOCAL_CNT_UNSPEC", "none"),
                ("SEG6_LOCAL_CNT_PAD", "none"),
                ("SEG6_LOCAL_CNT_PACKETS", "uint64"),
                ("SEG6_LOCAL_CNT_BYTES", "uint64"),
                ("SEG6_LOCAL_CNT_ERRORS", "uint64"),
            )

        class flavors(nla):
            nla_map = (
                ("SEG6_LOCAL_FLV_UNSPEC", "none"),
                ("SEG6_LOCAL_FLV_OPERATION", "uint32"),
                ("SEG6_LOCAL_FLV_LCBLOCK_BITS", "uint8"),
                ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", "uint8"),
            )

    encaps = {**rtmsg.encaps, LWTUNNEL_ENCAP_SEG6_LOCAL: seg6local_csid_info}


def end_sid_message(sid: IPv6Network, oif: int, block_bits: int, usid_bits: int) -> csid_rtmsg:
    """RTM_NEWROUTE for `sid` as seg6local End, next-csid flavor, with counters on."""
    msg = csid_rtmsg()
    msg["family"] = socket.AF_INET6
    msg["dst_len"] = sid.prefixlen
    msg["table"] = RT_TABLE_MAIN
    msg["proto"] = RTPROT_STATIC
    msg["scope"] = 0
    msg["type"] = RTN_UNICAST
    zero = [(f"SEG6_LOCAL_CNT_{name}", 0) for name in ("PACKETS", "BYTES", "ERRORS")]
    flavor = [("SEG6_LOCAL_FLV_OPERATION", 1 << SEG6_LOCAL_FLV_OP_NEXT_CSID),
              ("SEG6_LOCAL_FLV_LCBLOCK_BITS", block_bits),
              ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", usid_bits)]
    msg["attrs"] = [
        ("RTA_DST", str(sid.network_address)),
        ("RTA_OIF", oif),
        ("RTA_ENCAP_TYPE", LWTUNNEL_ENCAP_SEG6_LOCAL),
        ("RTA_ENCAP", {"attrs": [
            ("SEG6_LOCAL_ACTION", {"value": "End"}),
            ("SEG6_LOCAL_COUNTERS", {"attrs": zero}),
            ("SEG6_LOCAL_FLAVORS", {"attrs": flavor}),
        ]}),
    ]
    msg["header"]["type"] = RTM_NEWROUTE
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL
    return msg


def dump_end_sids(ipr, oif: int | None = None) -> dict[IPv6Network, dict]:
    """Every seg6local route of a namespace (only those via `oif`, if given):
    prefix -> {packets, bytes, errors, next_csid}."""
    # Decode this socket's route messages with the extended class (the map is per socket).
    ipr.marshal.msg_map[RTM_NEWROUTE] = csid_rtmsg
    out: dict[IPv6Network, dict] = {}
    query = {"family": socket.AF_INET6} if oif is None else {"family": socket.AF_INET6, "oif": oif}
    for msg in ipr.route("dump", **query):
        if msg.get_attr("RTA_ENCAP_TYPE") != LWTUNNEL_ENCAP_SEG6_LOCAL:
            continue
        encap = msg.get_attr("RTA_ENCAP")
        counters = encap.get_attr("SEG6_LOCAL_COUNTERS")
        flavors = encap.get_attr("SEG6_LOCAL_FLAVORS")
        prefix = IPv6Network(f"{msg.get_attr('RTA_DST')}/{msg['dst_len']}")
        out[prefix] = {
            "packets": counters.get_attr("SEG6_LOCAL_CNT_PACKETS") if counters else None,
            "bytes": counters.get_attr("SEG6_LOCAL_CNT_BYTES") if counters else None,
            "errors": counters.get_attr("SEG6_LOCAL_CNT_ERRORS") if counters else None,
            "next_csid": bool(flavors and flavors.get_attr("SEG6_LOCAL_FLV_OPERATION")
                              & (1 << SEG6_LOCAL_FLV_OP_NEXT_CSID)),
        }
    return out
