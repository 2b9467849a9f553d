"""Where the tracing words sit in the context tensor, and the trace buffers' order and types:
shared by the host (core.py, which writes them) and the device (device.py, which reads them).

After ``[cur_rank, num_ranks, heap_base_0 .. heap_base_{W-1}]`` comes the tracing flag (word
2 + W, the one word a context without tracing has there, 0). With tracing enabled the flag is 1
and is followed, as in Iris, by max_events, the event counter's address, the operation counter's
address and the thirteen buffers' addresses, in BUFFERS' order.
"""

FLAG = 0  # offsets from word 2 + W
MAX_EVENTS = 1
COUNTER = 2
OP_COUNTER = 3
FIRST_BUFFER = 4

# (name, element width in bits): Iris's structure of arrays, one element per event.
BUFFERS = (
    ("event_id", 32),
    ("pid", 32),
    ("pid_m", 32),
    ("pid_n", 32),
    ("cur_rank", 32),
    ("target_rank", 32),
    ("xcc_id", 32),
    ("cu_id", 32),
    ("timestamp", 64),
    ("address", 64),
    ("duration_cycles", 64),  # holds the end timestamp (0 until record_event_end), as in Iris
    ("op_index", 32),
    ("payload_size", 32),
)

WORDS = FIRST_BUFFER + len(BUFFERS)  # the words after the heap bases when tracing is enabled
