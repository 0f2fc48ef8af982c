"""The transports as pure logic (sans-IO): the wire header, queue pairs, MRC and the RoCEv2
baseline, loss recovery, the EV set and its states, NSCC, DCQCN and the NIC's pacing. Nothing
here opens a socket, reads a clock or runs an event loop; the runtime feeds it datagrams and
the time (tests/unit/test_layers.py keeps it so)."""
