"""The 1 MiB echo breakdown's arithmetic (benchmarks/large_stages.py): stamps of two processes
become one duration per stage, the stages tile the echo, each frame's reads are counted, and an
echo missing a stamp is left out rather than miscounted."""

from benchmarks import large_stages

# One echo's stamps in ns, in the order the echo takes them; a frame record per receiving side.
CONTROLLER = {"pickled": 1_000, "write_in": 2_000, "write_out": 3_500, "decode": 12_000, "resolved": 12_500,
              "woken": 13_000, "loaded": 13_500,
              "frame": {"first": 10_000, "last_read": 11_500, "reads": [65_536, 983_129], "setup_ns": 400}}
PROC = {"decode": 5_000, "submit": 5_200, "call_in": 6_000, "loaded": 6_500, "call_out": 6_600, "dumped": 7_000,
        "write_in": 7_500, "write_out": 9_000,
        "frame": {"first": 2_500, "last_read": 4_500, "reads": [65_536, 500_000, 483_179], "setup_ns": 300}}


def test_the_stages_tile_the_echo_and_the_frames_are_counted():
    samples = large_stages.stage_samples([(3, 0, 14_000)], {3: PROC}, {3: CONTROLLER})
    got = {name: values[0] for name, values in samples.items()}
    tiling = [name for name, _, _ in large_stages.STAGES]
    assert sum(got[name] for name in tiling) == got["total"] == 14.0
    assert got["request: sendmsg to the last read parsed (proc)"] == 3.0  # controller write_in -> proc decode
    assert got["actor: unpickle the argument"] == 0.5
    assert got["request: sendmsg to proc's first wake-up"] == 0.5
    assert got["reply: sendmsg of the frame (proc)"] == 1.5
    assert got["request: reads per frame"] == 3 and got["reply: reads per frame"] == 2
    assert got["request: bytes of the largest read"] == 500_000 and got["reply: bytes of the first read"] == 65_536
    assert got["request: proc's buffer setup"] == 0.3


def test_an_echo_missing_a_stamp_is_left_out():
    partial = {k: v for k, v in PROC.items() if k != "loaded"}
    samples = large_stages.stage_samples([(3, 0, 14_000), (4, 0, 14_000)], {3: partial, 4: PROC}, {3: CONTROLLER, 4: CONTROLLER})
    assert all(len(values) == 1 for values in samples.values())
