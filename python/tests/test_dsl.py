"""plugboard_dsl: the shipped programs compute their collectives (checked
by the reference interpreter) at 1-8 ranks and compile to version-5 plans;
every validation error names where it is; the command line writes plans."""
import json
import os
import subprocess
import sys

import pytest

SRC = os.path.join(os.path.dirname(__file__), "..")
sys.path.append(SRC)  # after PYTHONPATH: the plugboard package comes from the build tree

from plugboard_dsl import PLAN_VERSION, Program, ValidationError  # noqa: E402
from plugboard_dsl import simulate  # noqa: E402
from plugboard_dsl.programs import MEMORY_ONLY, SHIPPED  # noqa: E402


def value(r, c):
    return 100 * (r + 1) + c


def expected(name, n):
    if name.startswith("allgather"):
        return [[value(q, 0) for q in range(n)] for _ in range(n)]
    if name.startswith("alltoall"):
        return [[value(q, r) for q in range(n)] for r in range(n)]
    if name in ("allreduce_allpairs", "allreduce_allpairs_packets", "allreduce_allpairs_blocks"):
        return [[sum(value(q, 0) for q in range(n))] for _ in range(n)]
    if name in ("allreduce_ring", "allreduce_packets", "allreduce_allpairs_twoshot", "allreduce_switch"):
        return [[sum(value(q, c) for q in range(n)) for c in range(n)] for _ in range(n)]
    raise KeyError(name)


@pytest.mark.parametrize("name", sorted(SHIPPED))
@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("channel", ["memory", "port"])
def test_shipped_programs_compute_their_collective(name, n, channel):
    if channel == "port" and name in MEMORY_ONLY:
        raises(lambda: SHIPPED[name](n, channel), "memory channels only")
        return
    plan = json.loads(json.dumps(SHIPPED[name](n, channel).plan()))  # through JSON, as a file would
    assert plan["plan_version"] == PLAN_VERSION == 5
    assert plan["nranks"] == n and len(plan["ranks"]) == n
    assert all(c["type"] == channel for r in plan["ranks"] for c in r["channels"])
    inputs = [[value(r, c) for c in range(plan["buffers"]["input"])] for r in range(n)]
    assert simulate.run(plan, inputs) == expected(name, n)


def two_ranks(**kw):
    return Program("t", "custom", 2, **kw)


def raises(fn, *fragments):
    with pytest.raises(ValidationError) as e:
        fn()
    for f in fragments:
        assert f in str(e.value), str(e.value)


def test_chunks_out_of_bounds_or_of_unequal_sizes():
    p = two_ranks(input_chunks=2, output_chunks=2)
    raises(lambda: p.rank(0).input[2], "rank 0 input[2:3] is out of bounds", "has 2 chunks")
    raises(lambda: p.rank(1).scratch[0], "scratch[0:1] is out of bounds", "has 0 chunks")
    raises(lambda: p.rank(2), "rank 2 is out of range [0, 2)")
    raises(lambda: p.copy(p.rank(0).input[0:2], p.rank(0).output[0], tb=0), "copy: chunks of different sizes")


def test_channels_and_puts_must_join_the_right_ranks():
    p = two_ranks()
    raises(lambda: p.channel(1, 1), "a channel from rank 1 to itself")
    raises(lambda: p.channel(0, 1, "nvlink"), "channel type 'nvlink'")
    ch = p.channel(0, 1)
    raises(lambda: ch.put(p.rank(1).input[0], p.rank(1).output[0], tb=0), "source rank 1 input[0:1] must be on rank 0")
    raises(lambda: ch.flush(tb=0), "only port channels flush")
    raises(lambda: p.copy(p.rank(0).input[0], p.rank(1).output[0], tb=0), "both must be on one rank")
    raises(lambda: p.reduce(p.rank(0).output[0], [], tb=0), "with no sources")
    raises(lambda: p.copy(p.rank(0).input[0], p.rank(0).output[0], tb=-1), "thread block -1")


def test_program_arguments():
    raises(lambda: Program("t", "allsum", 2), "collective 'allsum'")
    raises(lambda: Program("t", "allreduce", 2, protocol="ll128"), "protocol 'll128' is not one of simple, ll")
    raises(lambda: Program("t", "allreduce", 2, packet_chunks=2), "packet_chunks=2 needs protocol='ll'")
    raises(lambda: Program("t", "allreduce", 0), "nranks must be an integer >= 1")
    raises(lambda: Program("t", "allreduce", 2, in_place=True, input_chunks=1, output_chunks=2).validate(),
           "in place they are one buffer")


def put_and_copy(p, signal=True, wait=True):
    """Rank 0 puts its input into rank 1's scratch; rank 1 copies it to its output."""
    p.copy(p.rank(0).input[0], p.rank(0).output[0], tb=0)
    ch = p.channel(0, 1)
    ch.put(p.rank(0).input[0], p.rank(1).scratch[0], tb=0)
    if signal:
        ch.signal(tb=0)
    if wait:
        p.channel(1, 0).wait(tb=0)
    p.copy(p.rank(1).scratch[0], p.rank(1).output[0], tb=0)


def test_a_correct_two_rank_program_validates_and_runs():
    p = two_ranks(scratch_chunks=1)
    put_and_copy(p)
    assert simulate.run(p.plan(), [[7], [8]]) == [[7], [7]]


def test_signals_and_waits_must_pair():
    p = two_ranks(scratch_chunks=1)
    put_and_copy(p, wait=False)
    p.channel(1, 0)  # the channel exists, nobody waits on it
    raises(p.validate, "rank 0 signals rank 1 1 times on the memory channel (tag 0) but rank 1 waits 0 times")
    q = two_ranks(scratch_chunks=1)
    put_and_copy(q, signal=False)
    raises(q.validate, "rank 0 signals rank 1 0 times", "waits 1 times", "rank 1 thread block 0 operation 0 (wait)")


def test_a_cycle_of_waits_is_a_deadlock():
    p = two_ranks()
    for r in (0, 1):
        p.channel(r, 1 - r).wait(tb=0)  # both wait first
        p.channel(r, 1 - r).signal(tb=0)
        p.copy(p.rank(r).input[0], p.rank(r).output[0], tb=0)
    raises(p.validate, "deadlock", "waits for a signal, packets or a barrier's thread blocks that come only after it")
    with pytest.raises(simulate.Deadlock):
        simulate.run(__import__("plugboard_dsl.plan", fromlist=["to_plan"]).to_plan(p), [[1], [2]])


def test_unordered_accesses_to_the_same_bytes_are_a_race():
    p = two_ranks(scratch_chunks=1)
    p.copy(p.rank(0).input[0], p.rank(0).output[0], tb=0)
    ch = p.channel(0, 1)
    ch.put(p.rank(0).input[0], p.rank(1).scratch[0], tb=0)
    ch.signal(tb=0)
    p.channel(1, 0).wait(tb=1)  # waits on thread block 1, reads on thread block 0: no order
    p.copy(p.rank(1).scratch[0], p.rank(1).output[0], tb=0)
    raises(p.validate, "race on rank 1 scratch[0:1]", "rank 0 thread block 0 operation 1 (put)",
           "rank 1 thread block 0 operation 0 (copy)")


def test_writing_the_input_out_of_place_and_unwritten_outputs():
    p = two_ranks()
    for r in (0, 1):
        p.copy(p.rank(r).output[0], p.rank(r).input[0], tb=0)
    raises(p.validate, "rank 0 thread block 0 operation 0 (copy) writes rank 0 input[0:1]", "read-only")
    q = two_ranks()
    q.copy(q.rank(0).input[0], q.rank(0).output[0], tb=0)
    raises(q.validate, "rank 1 output[0] is never written")


def ll_two_ranks():
    return Program("t", "custom", 2, protocol="ll", input_chunks=1, output_chunks=1, packet_chunks=2)


def test_a_correct_ll_program_runs_without_signals():
    p = ll_two_ranks()
    for r in (0, 1):
        me, peer = p.rank(r), p.rank(1 - r)
        p.channel(r, 1 - r).put_packet(me.input[0], peer.packets[0], tb=0)
        p.reduce_packet(me.output[0], [me.input[0]], [me.packets[0]], tb=0)
    assert simulate.run(p.plan(), [[3], [4]]) == [[7], [7]]
    plan = p.plan()
    assert plan["protocol"] == "ll" and plan["buffers"]["packets"] == 2
    assert plan["ranks"][0]["threadblocks"][0]["ops"][1] == {
        "op": "reduce_packet", "dst": {"buffer": "output", "index": 0, "size": 1},
        "srcs": [{"buffer": "input", "index": 0, "size": 1}], "packets": [{"buffer": "packets", "index": 0, "size": 1}]}


def test_ll_operations_and_their_buffers_are_checked():
    simple = two_ranks(scratch_chunks=1)
    raises(lambda: simple.channel(0, 1).put_packet(simple.rank(0).input[0], simple.rank(1).output[0], tb=0),
           "rank 0 thread block 0: put_packet needs protocol='ll'")
    p = ll_two_ranks()
    me, peer, ch = p.rank(0), p.rank(1), p.channel(0, 1)
    raises(lambda: ch.put(me.input[0], peer.output[0], tb=0), "put in an LL program")
    raises(lambda: ch.signal(tb=3), "rank 0 thread block 3: signal in an LL program")
    raises(lambda: ch.put_packet(me.input[0], peer.output[0], tb=0), "the destination a packets chunk")
    raises(lambda: ch.put_packet(me.input[0], me.packets[0], tb=0), "destination rank 0 packets[0:1] on rank 1")
    raises(lambda: p.reduce_packet(me.output[0], [me.input[0]], [], tb=0), "with no packets chunks")
    raises(lambda: p.reduce_packet(me.output[0], [], [me.input[0]], tb=0), "is listed among packets but is a data chunk")
    raises(lambda: p.copy(me.packets[0], me.output[0], tb=0), "copy touches rank 0 packets[0:1]",
           "read by reduce_packet only")


def test_ll_packets_are_put_once_and_only_awaited_when_put():
    p = ll_two_ranks()
    for r in (0, 1):
        me, peer = p.rank(r), p.rank(1 - r)
        p.channel(r, 1 - r).put_packet(me.input[0], peer.packets[0], tb=0)
        p.channel(r, 1 - r).put_packet(me.input[0], peer.packets[0], tb=1)
        p.reduce_packet(me.output[0], [], [me.packets[0]], tb=0)
    raises(p.validate, "rank 0 thread block 1 operation 0 (put_packet) puts packets into rank 1 packets[0]",
           "already puts", "one put_packet per call")
    q = ll_two_ranks()
    for r in (0, 1):
        q.reduce_packet(q.rank(r).output[0], [], [q.rank(r).packets[1]], tb=0)
    raises(q.validate, "rank 0 thread block 0 operation 0 (reduce_packet) waits for rank 0 packets[1]",
           "which no put_packet writes")


def test_ll_packets_awaited_before_they_are_sent_are_a_deadlock():
    p = ll_two_ranks()
    for r in (0, 1):  # each waits for the other's packets before putting its own
        me, peer = p.rank(r), p.rank(1 - r)
        p.reduce_packet(me.output[0], [me.input[0]], [me.packets[0]], tb=0)
        p.channel(r, 1 - r).put_packet(me.input[0], peer.packets[0], tb=0)
    raises(p.validate, "deadlock", "(reduce_packet) waits for a signal, packets or a barrier's thread blocks")
    with pytest.raises(simulate.Deadlock):
        simulate.run(__import__("plugboard_dsl.plan", fromlist=["to_plan"]).to_plan(p), [[1], [2]])


def test_command_line_writes_a_plan_and_names_bad_programs(tmp_path):
    out = tmp_path / "ring.json"
    env = dict(os.environ, PYTHONPATH=SRC)
    done = subprocess.run([sys.executable, "-m", "plugboard_dsl", "allreduce_ring", "--nranks", "4", "-o", str(out)],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    plan = json.loads(out.read_text())
    assert plan["name"] == "allreduce_ring" and plan["nranks"] == 4
    bad = tmp_path / "bad.py"
    bad.write_text("from plugboard_dsl import Program\n"
                   "def make(n, channel):\n"
                   "    return Program('x', 'custom', n)\n")
    done = subprocess.run([sys.executable, "-m", "plugboard_dsl", "--file", str(bad), "--nranks", "2", "-o",
                           str(tmp_path / "x.json")], env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "rank 0 output[0] is never written" in done.stderr
    done = subprocess.run([sys.executable, "-m", "plugboard_dsl", "nosuch", "--nranks", "2", "-o", str(out)],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "no program 'nosuch'" in done.stderr


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_committed_plans_match_their_programs(name):
    """plans/<program>/<n>ranks.json and port-<n>ranks.json are what plans/generate.sh writes."""
    shipped = [(n, "memory", f"{n}ranks.json") for n in range(2, 9)]
    if name not in MEMORY_ONLY:
        shipped += [(n, "port", f"port-{n}ranks.json") for n in range(2, 5)]
    for n, channel, file in shipped:
        path = os.path.join(SRC, "..", "plans", name, file)
        with open(path) as f:
            assert json.load(f) == SHIPPED[name](n, channel).plan(), f"{path} is stale: run plans/generate.sh"


def test_pip_install_of_the_python_directory_gives_the_dsl_and_its_command(tmp_path):
    """`pip install ./python` (README) on a copy of the directory: the
    package and the plugboard-dsl command work from the install alone."""
    import shutil
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(SRC, name), src / name)
    shutil.copytree(os.path.join(SRC, "plugboard_dsl"), src / "plugboard_dsl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                    "--target", str(target), str(src)], check=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = tmp_path / "ring4.json"
    subprocess.run([str(target / "bin" / "plugboard-dsl"), "allreduce_ring", "--nranks", "4", "-o", str(out)],
                   check=True, env=env, cwd=str(tmp_path))
    plan = json.loads(out.read_text())
    assert plan["plan_version"] == PLAN_VERSION and plan["nranks"] == 4 and plan["collective"] == "allreduce"


@pytest.mark.parametrize("n", range(2, 6))
def test_a_barrier_orders_thread_blocks_of_a_rank(n):
    plan = json.loads(json.dumps(SHIPPED["allreduce_allpairs_blocks"](n).plan()))
    ops = plan["ranks"][0]["threadblocks"][0]["ops"]
    assert ops[0] == {"op": "barrier", "barrier": 0, "threadblocks": [0] + [1 + q for q in range(1, n)]}
    assert simulate.run(plan, [[value(r, 0)] for r in range(n)]) == expected("allreduce_allpairs", n)


def test_without_the_barrier_the_reduce_races_the_peers_puts():
    p = Program("t", "allreduce", 2, input_chunks=1, output_chunks=1, scratch_chunks=2)
    for r in (0, 1):
        ch = p.channel(r, 1 - r)
        ch.put(p.rank(r).input[0], p.rank(1 - r).scratch[r], tb=1)
        ch.signal(tb=1)
        ch.wait(tb=1)
        p.reduce(p.rank(r).output[0], [p.rank(r).input[0], p.rank(r).scratch[1 - r]], tb=0)  # no barrier
    raises(p.validate, "race on rank 0 scratch[1:2]", "no signal/wait, barrier or thread-block order between them")


def test_thread_blocks_meeting_a_barrier_in_a_cycle_deadlock():
    p = two_ranks()
    p.channel(0, 1).wait(tb=1)  # rank 0 thread block 1 waits for rank 1 before the barrier...
    p.barrier(0, [0, 1])
    p.channel(0, 1).signal(tb=0)  # ...which signals only after rank 0 thread block 0 passed it
    p.channel(1, 0).wait(tb=0)
    p.channel(1, 0).signal(tb=0)
    for r in (0, 1):
        p.copy(p.rank(r).input[0], p.rank(r).output[0], tb=0)
    raises(p.validate, "deadlock", "a barrier's thread blocks")
    with pytest.raises(simulate.Deadlock):
        simulate.run(__import__("plugboard_dsl.plan", fromlist=["to_plan"]).to_plan(p), [[1], [2]])


def test_a_barrier_needs_two_distinct_thread_blocks_of_a_rank():
    p = two_ranks()
    raises(lambda: p.barrier(0, [3]), "rank 0: a barrier joins two or more distinct thread blocks, got [3]")
    raises(lambda: p.barrier(0, [1, 1]), "two or more distinct thread blocks, got [1, 1]")
    raises(lambda: p.barrier(2, [0, 1]), "barrier rank 2 is out of range [0, 2)")


def test_get_reads_the_peers_chunk_over_memory_channels_only():
    p = two_ranks(input_chunks=1, output_chunks=2)
    ch = p.channel(0, 1, "memory")
    raises(lambda: p.channel(0, 1, "port").get(p.rank(1).input[0], p.rank(0).output[1], tb=0),
           "get on rank 0's port channel to 1", "only memory channels read peer memory")
    raises(lambda: ch.get(p.rank(0).input[0], p.rank(0).output[1], tb=0),
           "source rank 0 input[0:1] must be on rank 1", "destination rank 0 output[1:2] on rank 0")
    raises(lambda: ch.get(p.rank(1).input[0], p.rank(0).output[0:2], tb=0), "get: chunks of different sizes")
    ll = two_ranks(protocol="ll", packet_chunks=1)
    raises(lambda: ll.channel(0, 1).get(ll.rank(1).input[0], ll.rank(0).output[0], tb=0), "get in an LL program")


def test_a_get_the_owner_may_outlive_is_refused():
    p = two_ranks(input_chunks=1, output_chunks=2)
    for r in range(2):
        p.copy(p.rank(r).input[0], p.rank(r).output[r], tb=0)
        p.channel(r, 1 - r).get(p.rank(1 - r).input[0], p.rank(r).output[1 - r], tb=1)
    raises(p.validate, "rank 0 thread block 1 operation 0 (get) reads rank 1 input[0:1]",
           "no operation of rank 1 comes after it")


def test_a_get_racing_the_owners_write_is_refused():
    p = two_ranks(input_chunks=1, output_chunks=1, scratch_chunks=1)
    p.copy(p.rank(1).input[0], p.rank(1).scratch[0], tb=0)  # rank 1 writes the chunk rank 0 reads
    p.channel(1, 0).signal(tb=0)
    p.channel(1, 0).wait(tb=0)
    p.channel(0, 1).get(p.rank(1).scratch[0], p.rank(0).output[0], tb=0)
    p.channel(0, 1).wait(tb=0)
    p.channel(0, 1).signal(tb=0)
    p.copy(p.rank(1).scratch[0], p.rank(1).output[0], tb=0)
    raises(p.validate, "race on rank 1 scratch[0:1]")


def switch_program(n=2, wait_first=True, scratch=2):
    """Every rank copies its input into the switch-bound scratch, waits for
    every peer, reduces chunk r over the group and broadcasts it into
    every rank's output (allreduce_switch, written out for mutation)."""
    p = Program("sw", "allreduce", n, input_chunks=n, output_chunks=n, scratch_chunks=scratch * n)
    for r in range(n):
        me, peers = p.rank(r), [q for q in range(n) if q != r]
        p.copy(me.input[0:n], me.scratch[0:n], tb=0)
        for q in peers:
            p.channel(r, q).signal(tb=0)
        if wait_first:
            for q in peers:
                p.channel(r, q).wait(tb=0)
        p.switch_channel(r, "scratch").reduce(me.scratch[r], me.scratch[n + r], tb=0)
        p.switch_channel(r, "output").broadcast(me.scratch[n + r], me.output[r], tb=0)
        for q in peers:
            p.channel(r, q).signal(tb=0)
        if not wait_first:
            for q in peers:
                p.channel(r, q).wait(tb=0)
        for q in peers:
            p.channel(r, q).wait(tb=0)
    return p


def test_switch_channels_reduce_over_and_store_into_every_rank():
    plan = switch_program(3).plan()
    assert plan["ranks"][1]["switches"] == [{"id": 0, "buffer": "scratch", "tag": 0},
                                            {"id": 1, "buffer": "output", "tag": 0}]
    ops = plan["ranks"][1]["threadblocks"][0]["ops"]
    assert [o["op"] for o in ops if o["op"].startswith("switch")] == ["switch_reduce", "switch_broadcast"]
    assert simulate.run(plan, [[1, 2, 3], [10, 20, 30], [100, 200, 300]]) == [[111, 222, 333]] * 3
    assert "switches" not in SHIPPED["allreduce_ring"](3).plan()["ranks"][0]


def test_switch_operations_and_their_chunks_are_checked():
    p = two_ranks(input_chunks=1, output_chunks=2, scratch_chunks=2)
    raises(lambda: p.switch_channel(0, "input"), "a switch channel binds output or scratch, not 'input'")
    sw = p.switch_channel(0, "scratch")
    raises(lambda: p.switch_channel(0, "scratch", tag=1), "rank 0's scratch is bound to switch channel 0 (tag 0)")
    raises(lambda: sw.reduce(p.rank(0).output[0], p.rank(0).output[1], tb=0), "source rank 0 output[0:1]",
           "must be a chunk of rank 0's scratch, the bound buffer")
    raises(lambda: sw.reduce(p.rank(1).scratch[0], p.rank(0).output[1], tb=0), "source rank 1 scratch[0:1]")
    raises(lambda: sw.reduce(p.rank(0).scratch[0], p.rank(1).output[1], tb=0), "destination rank 1 output[1:2] must be on rank 0")
    raises(lambda: sw.reduce(p.rank(0).scratch[0:2], p.rank(0).output[1], tb=0), "switch_reduce: chunks of different sizes")
    raises(lambda: sw.broadcast(p.rank(0).input[0], p.rank(0).output[0], tb=0), "destination rank 0 output[0:1]")
    raises(lambda: sw.broadcast(p.rank(1).input[0], p.rank(0).scratch[0], tb=0), "source rank 1 input[0:1] must be on rank 0")
    ll = two_ranks(protocol="ll", packet_chunks=1, scratch_chunks=1)
    raises(lambda: ll.switch_channel(0, "scratch").reduce(ll.rank(0).scratch[0], ll.rank(0).output[0], tb=0),
           "switch_reduce in an LL program")


def test_switch_programs_need_like_channels_on_every_rank_and_memory_channels_between_all():
    p = switch_program(2)
    assert p.switch_channel(1, "output") is p.switches[1][1]  # made once, found again
    p.validate()
    q = Program("sw", "allreduce", 2, input_chunks=2, output_chunks=2, scratch_chunks=4)
    q.switch_channel(0, "scratch")
    q.switch_channel(1, "output")
    raises(q.validate, "rank 1's switch channels [('output', 0)] differ from rank 0's [('scratch', 0)]")
    r = switch_program(2)
    r.channel(0, 1, "port")
    raises(r.validate, "rank 0's port channel to rank 1 in a program with switch channels")
    t = Program("sw", "allreduce", 3, input_chunks=3, output_chunks=3, scratch_chunks=6)
    for k in range(3):
        t.switch_channel(k, "scratch")
    t.channel(0, 1), t.channel(1, 0)
    raises(t.validate, "rank 0 has no memory channel to rank 2")
    u = switch_program(2)
    u.channel(0, 1).put(u.rank(0).input[0], u.rank(1).scratch[1], tb=1)
    raises(u.validate, "rank 0 thread block 1 operation 0 (put) touches rank 1's scratch",
           "peers reach it only through that channel")


def test_a_switch_reduce_before_the_peers_copied_is_a_race():
    raises(switch_program(2, wait_first=False).validate, "race on rank 0 scratch[0:2]",
           "rank 1 thread block 0 operation 2 (switch_reduce) and rank 0 thread block 0 operation 0 (copy)")


def test_in_place_a_put_into_a_peers_input_reaches_its_bound_output():
    p = Program("sw", "allreduce", 2, in_place=True, input_chunks=2, output_chunks=2, scratch_chunks=2)
    for r in range(2):
        p.switch_channel(r, "output")
        p.channel(r, 1 - r).signal(tb=0)
        p.channel(r, 1 - r).wait(tb=0)
    p.channel(0, 1).put(p.rank(0).input[0], p.rank(1).input[1], tb=1)
    raises(p.validate, "rank 0 thread block 1 operation 0 (put) touches rank 1's output", "bound to a switch channel")
