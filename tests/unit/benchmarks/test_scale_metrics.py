"""scale.py's reading of the API server's own metrics: request counts by verb and resource
(subresources apart, codes and groups summed), their growth per pod between two scrapes, and the
mean server-side latency of a pod create."""

from benchmarks import scale

BEFORE = """# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 10
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1.0
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 10
"""
AFTER = """apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 30
apiserver_request_total{code="409",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 30
apiserver_request_total{code="200",component="apiserver",group="",resource="endpoints",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 5.0
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 30
apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 99
apiserver_request_duration_seconds_count{component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 1
"""


def test_requests_by_verb_and_resource_with_subresources_apart():
    assert scale.server_requests(AFTER) == {"POST pods": 32, "POST pods/binding": 30,
                                            "PUT endpoints": 5}


def test_the_growth_per_pod_and_the_mean_create_latency():
    delta = scale.server_delta(BEFORE, AFTER, per=20)
    assert delta["requests_total"] == 47
    assert delta["requests_per_pod"] == {"POST pods": 1.1, "POST pods/binding": 1.0,
                                         "PUT endpoints": 0.25}
    assert delta["pod_create_mean_ms"] == 200.0  # (5.0 - 1.0) s over 20 creates; not binding's
