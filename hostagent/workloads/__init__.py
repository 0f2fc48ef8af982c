"""What the ranks run over an Endpoint: collectives, the timed iteration loop with verified
buffers, nccl-tests' numbers, and an in-memory fabric to test them on."""
