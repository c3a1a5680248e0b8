# The examples image of the e2e tests (tests/cluster/real_node/images.py), built FROM a Python with
# torch: procmesh with the `kubernetes` extra and examples/ at EXAMPLES_DIR. It runs the proc server
# as images/proc-server/Dockerfile's image does (same user, HOME, CMD), and controller Jobs; a
# Job and the procs of a mesh using this image see the example files at the same path.
ARG BASE
FROM ${BASE}
ARG EXAMPLES_DIR=/opt/procmesh/examples
USER 0
WORKDIR /opt/procmesh
COPY pyproject.toml README.md ./
COPY mesh_client/ mesh_client/
COPY operator/procmesh_operator/ operator/procmesh_operator/
RUN python -m pip install --no-cache-dir ".[kubernetes]" \
 && python -c "import mesh_client.kubernetes"
COPY examples/ ${EXAMPLES_DIR}/
ENV HOME=/tmp PYTHONUNBUFFERED=1
USER 10001:0
WORKDIR /tmp
CMD ["python", "-m", "mesh_client.proc_server"]
