"""scale.py's loops by hand: the objects they create per mesh come from the operator's own
builders under the gang the operator uses (a PodGroup of every proc that every pod names; the
gate on every pod; plain pods), unowned and outside any mesh; the settings come from the
operator's own parser; the ratios judge the target against the loop that gangs like the
operator."""

from benchmarks import scale
from mesh_client._src import contract
from procmesh_operator import ganging


def test_a_podgroup_per_mesh_of_every_proc_that_every_pod_names():
    objects = scale.baseline("ns", "base0", 64, ganging.POD_GROUP)
    group = objects.pod_group
    assert group is not None
    assert (group["apiVersion"], group["kind"]) == ("scheduling.k8s.io/v1alpha2", "PodGroup")
    assert group["metadata"]["namespace"] == "ns"
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 64 == len(objects.pods)
    for pod in objects.pods:
        assert pod["spec"]["schedulingGroup"] == {"podGroupName": group["metadata"]["name"]}
        assert not ganging.is_gated(pod)


def test_a_big_mesh_is_one_gang_of_all_its_hosts():
    objects = scale.baseline("ns", "big", 4096, ganging.POD_GROUP)
    assert objects.pod_group is not None
    assert objects.pod_group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4096
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in objects.pods} == {
        objects.pod_group["metadata"]["name"]}
    assert len({p["metadata"]["name"] for p in objects.pods}) == 4096


def test_meshes_of_one_loop_have_groups_of_their_own():
    a = scale.baseline("ns", "base0", 8, ganging.POD_GROUP).pod_group
    b = scale.baseline("ns", "base1", 8, ganging.POD_GROUP).pod_group
    assert a is not None and b is not None
    assert a["metadata"]["name"] != b["metadata"]["name"]


def test_the_loops_objects_are_no_meshs():
    objects = scale.baseline("ns", "base0", 4, ganging.POD_GROUP)
    for obj in (objects.secret, objects.pod_group, *objects.pods):
        assert obj is not None
        assert "ownerReferences" not in obj["metadata"]
        assert contract.MESH_LABEL not in obj["metadata"].get("labels", {})
    for pod in objects.pods:  # still the operator's pod otherwise
        assert pod["spec"]["volumes"][0]["secret"]["secretName"] == \
            objects.secret["metadata"]["name"]
        assert pod["spec"]["nodeSelector"]


def test_gate_mode_gates_every_pod_and_has_no_group():
    objects = scale.baseline("ns", "base0", 16, ganging.GATE)
    assert objects.pod_group is None
    assert all(ganging.is_gated(p) for p in objects.pods)
    assert all("schedulingGroup" not in p["spec"] for p in objects.pods)


def test_off_is_the_plain_loop():
    objects = scale.baseline("ns", "base0", 16)
    assert objects.pod_group is None
    for pod in objects.pods:
        assert "schedulingGroup" not in pod["spec"] and not ganging.is_gated(pod)
    secret, pods = scale.baseline_pods("ns", "base0", 16)
    assert [p["metadata"]["name"] for p in pods] == [p["metadata"]["name"] for p in objects.pods]
    assert all("schedulingGroup" not in p["spec"] for p in pods)


def test_a_one_proc_mesh_is_not_ganged_as_the_operator_decides():
    objects = scale.baseline("ns", "one", 1, ganging.POD_GROUP)
    assert objects.pod_group is None
    assert "schedulingGroup" not in objects.pods[0]["spec"]


def test_settings_are_read_as_the_operator_reads_its_arguments():
    assert scale.operator_settings([]).gang == ganging.AUTO
    settings = scale.operator_settings(["--gang=off", "--default-image=example/proc:1",
                                        "--create-concurrency", "4"])
    assert (settings.gang, settings.create_concurrency) == (ganging.OFF, 4)
    pod = scale.baseline("ns", "base0", 2, settings=settings).pods[0]
    assert pod["spec"]["containers"][0]["image"] == "example/proc:1"


def report(**extra):
    return {"waves": [{"wave_seconds": 250.0}], "loop": {"seconds": 125.0}, **extra}


def test_the_target_is_judged_against_the_ganged_loop_when_the_operator_gangs():
    out = scale.ratios(report(ganged_loop={"seconds": 240.0}))
    assert out["ratio_first_wave"] == 2.0
    assert out["ratio_first_wave_ganged"] == round(250 / 240, 3)
    assert out["target_baseline"] == "ganged_loop"
    assert out["target_ratio_measured"] == out["ratio_first_wave_ganged"]
    assert out["target_met"] is True


def test_without_the_gang_the_target_is_judged_against_the_plain_loop():
    out = scale.ratios(report())
    assert "ratio_first_wave_ganged" not in out
    assert (out["target_baseline"], out["target_ratio_measured"], out["target_met"]) == (
        "loop", 2.0, False)


def test_the_big_mesh_has_both_ratios_and_none_when_it_was_not_ready():
    out = scale.ratios(report(ganged_loop={"seconds": 250.0}, big_mesh={"wave_seconds": 300.0},
                              big_loop={"seconds": 100.0}, big_ganged_loop={"seconds": 200.0}))
    assert (out["ratio_big"], out["ratio_big_ganged"]) == (3.0, 1.5)
    out = scale.ratios(report(big_mesh={"ready": False}, big_loop={"seconds": 100.0}))
    assert "ratio_big" not in out


def test_a_bracketed_run_judges_against_the_mean_of_the_loop_before_and_after():
    out = scale.ratios(report(ganged_loop={"seconds": 200.0}, ganged_loop_after={"seconds": 300.0}))
    assert out["ratio_first_wave_ganged"] == 1.25
    assert out["ratio_first_wave_ganged_loop_after"] == round(250 / 300, 3)
    assert out["target_baseline"] == "mean of ganged_loop and ganged_loop_after"
    assert (out["target_ratio_measured"], out["target_met"]) == (1.0, True)
    out = scale.ratios(report(loop_after={"seconds": 375.0}))
    assert (out["target_baseline"], out["target_ratio_measured"]) == (
        "mean of loop and loop_after", 1.0)
