"""A template's fractional resource amounts go to the API server as strings: the CRD takes
whole numbers or quantity strings (it checks them at apply), so ``{"cpu": 0.5}`` from Python
still makes a mesh."""

from mesh_client._src.kubernetes.manifests import proc_mesh_manifest


def test_fractional_amounts_become_strings_and_the_rest_is_kept():
    template = {"image": "x", "resources": {"requests": {"cpu": 0.5, "memory": 1073741824},
                                            "limits": {"cpu": "2", "nvidia.com/gpu": 1}}}
    spec = proc_mesh_manifest("m", hosts=1, per_host={"gpus": 1}, template=template)["spec"]
    assert spec["template"] == {"image": "x", "resources": {"requests": {"cpu": "0.5", "memory": 1073741824},
                                                            "limits": {"cpu": "2", "nvidia.com/gpu": 1}}}
    assert template["resources"]["requests"]["cpu"] == 0.5  # the caller's dict is left as it was
