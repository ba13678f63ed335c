"""Shared fixtures: backends (CUDA skipped cleanly without CuPy or a GPU), dtypes, hypothesis."""

import collections
import functools
import os
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "ci", max_examples=100, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
# CI's packaging stages (.ci/floor, .ci/wheel): the same tests on another build or on the
# lowest versions, where the main stage already ran the "ci" profile's examples on this code
settings.register_profile(
    "quick", max_examples=15, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "nightly", max_examples=2000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
settings.load_profile("ci" if os.environ.get("CI") else "default")

#: Every dtype a LoDTensor may hold (docs/data-model.md#dtypes).
ALL_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "int64",
              "float16", "float32", "float64"]
NUMERIC_DTYPES = [d for d in ALL_DTYPES if d != "bool"]
FLOAT_DTYPES = ["float16", "float32", "float64"]


@functools.cache
def cuda_unavailable_reason():
    """None when CuPy and a CUDA GPU are usable, else why not."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or CUDA libraries that fail to load
        return f"CuPy is not installed ({exc.__class__.__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU"
    except Exception as exc:
        return f"no CUDA GPU ({exc.__class__.__name__})"
    return None


def _cuda_param():
    reason = cuda_unavailable_reason()
    marks = [pytest.mark.cuda]
    if reason:
        marks.append(pytest.mark.skip(reason=reason))
    return pytest.param("cuda", marks=marks)


#: The "cuda" backend parameter: marked ``cuda`` and skipped cleanly without CuPy or a GPU.
CUDA = _cuda_param()
BACKENDS = ["cpu", CUDA]

#: For a test that only means something on a GPU (mixed devices, CuPy buffers): run it with
#: ``backend="cuda"`` alone, so that it is a CUDA-parametrised test like every other one.
cuda_only = pytest.mark.parametrize("backend", [CUDA])


@pytest.fixture(params=BACKENDS)
def backend(request):
    """"cpu" or "cuda"; move inputs with :func:`on_backend`."""
    return request.param


def on_backend(obj, backend):
    """Move a LoDTensor or array to ``backend`` ("cpu" or "cuda")."""
    import lodarrow

    if backend == "cpu":
        return obj
    if isinstance(obj, lodarrow.LoDTensor):
        return obj.cuda()
    import cupy

    return cupy.asarray(obj)


def assert_on(obj, backend):
    """Assert that a LoDTensor or array lives on ``backend`` ("cpu" or "cuda"): a GPU operator
    that returned host data (or the reverse) must fail, not be copied over silently."""
    import lodarrow

    data = obj.data if isinstance(obj, lodarrow.LoDTensor) else obj
    on_gpu = hasattr(data, "__cuda_array_interface__") and not isinstance(data, np.ndarray)
    assert on_gpu == (backend == "cuda"), \
        f"expected data on {backend}, got {type(data).__module__}.{type(data).__name__}"
    if isinstance(obj, lodarrow.LoDTensor):
        assert obj.place.is_cuda == (backend == "cuda"), obj.place
    else:
        assert isinstance(data, np.ndarray) or on_gpu, type(data)


def to_host(obj, backend):
    """A LoDTensor or array that must live on ``backend`` (asserted), back on the host."""
    import lodarrow

    assert_on(obj, backend)
    if isinstance(obj, lodarrow.LoDTensor):
        return obj.cpu()
    if backend == "cuda":
        return obj.get()
    return obj


#: ``LODARROW_NUM_THREADS`` for the threaded-kernel tests: one thread, and two odd counts
#: above a small runner's cores, so that chunks (4 per thread) split unevenly.
THREAD_COUNTS = [1, 3, 7]

#: Parametrise a large-input test over ``(backend, threads)``: the CPU with every count in
#: ``THREAD_COUNTS`` (set through the ``threads`` fixture), CUDA once (threads do not apply).
threaded = pytest.mark.parametrize(
    "backend, threads",
    [pytest.param("cpu", n, id=f"cpu-{n}threads") for n in THREAD_COUNTS]
    + [pytest.param("cuda", None, marks=CUDA.marks, id="cuda")],
    indirect=["threads"],
)


@pytest.fixture
def threads(request, monkeypatch):
    """The thread count set in ``LODARROW_NUM_THREADS`` for this test (None: left alone)."""
    n = getattr(request, "param", None)
    if n is not None:
        monkeypatch.setenv("LODARROW_NUM_THREADS", str(n))
    return n


#: The two shapes of threaded input: many sequences (``4 * threads`` chunks balanced by
#: rows), and 11 long ones, so that 3 and 7 threads both get an odd number of chunks (11).
SEQUENCE_LAYOUTS = ["many", "few"]


def threaded_lengths(rng, n_rows, layout):
    """Sequence lengths summing to about ``n_rows`` (at least), for ``layout`` in
    :data:`SEQUENCE_LAYOUTS`, with empty sequences first, inside and (for "many") in runs,
    and a short last sequence."""
    if layout == "many":
        lengths = rng.geometric(1 / 24, size=max(64, n_rows // 23)).astype(np.int64)
        lengths[rng.random(lengths.size) < 0.05] = 0
        lengths[:3] = 0
    else:
        lengths = rng.integers(n_rows // 12, n_rows // 6, size=11).astype(np.int64)
        lengths[[0, 4]] = 0
    lengths[-1] = 3
    if lengths.sum() < n_rows:
        lengths[1] += n_rows - lengths.sum()
    return lengths


def parallel_min_work():
    """Elements of work below which a kernel runs on one thread (``lodarrow._ops``)."""
    from lodarrow._threads import PARALLEL_MIN_WORK

    return PARALLEL_MIN_WORK


@pytest.fixture(params=ALL_DTYPES)
def any_dtype(request):
    return np.dtype(request.param)


@pytest.fixture(params=NUMERIC_DTYPES)
def numeric_dtype(request):
    return np.dtype(request.param)


def run_python(args, **kwargs):
    """Run ``python *args`` in a subprocess that imports the lodarrow under test.

    The child runs outside the source tree, with the tested package's parent on PYTHONPATH,
    so it cannot pick up an unbuilt ``lodarrow/`` from the working directory.
    """
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    import lodarrow

    env = dict(os.environ, **kwargs.pop("env", {}))
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(lodarrow.__file__).parent.parent), env.get("PYTHONPATH")])
    )
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([sys.executable, *map(str, args)], cwd=kwargs.pop("cwd", cwd),
                              env=env, capture_output=True, text=True, **kwargs)


def checkout_root():
    """The source checkout (or unpacked sdist) these tests sit in, or None.

    The tests also run from a copy of ``tests/`` against an installed wheel; whatever reads the
    sources (``_ext/``, ``docs/``, ``README.md``, ``setup.py``) then skips.
    """
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "_ext").is_dir():
        return root
    return None


#: Skip a test that reads the source tree when the tests run outside one.
needs_checkout = pytest.mark.skipif(checkout_root() is None,
                                    reason="reads the source tree; the tests run outside one")


def java_unavailable_reason():
    """None when a Java runtime for Spark is found (``JAVA_HOME`` or ``java`` on PATH)."""
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return None
    if shutil.which("java"):
        return None
    return "no Java found (JAVA_HOME unset and no java on PATH): Spark needs Java 17+"


@pytest.fixture(scope="session")
def spark():
    """One local Spark (``local[2]``) for the whole test session, started on first use.

    Skipped where pyspark (a test dependency) is not installed or no Java is found.  Spark's
    Python workers run this interpreter with the tested lodarrow first on their path.
    """
    pytest.importorskip("pyspark.sql", reason="pyspark is not installed (lodarrow[spark])")
    reason = java_unavailable_reason()
    if reason:
        pytest.skip(reason)
    import sys
    from pathlib import Path

    from pyspark.sql import SparkSession

    import lodarrow

    saved = os.environ.get("PYTHONPATH")
    # the JVM and its Python workers inherit the driver's environment
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(lodarrow.__file__).parent.parent), saved]))
    # Spark's Python workers: this interpreter, also where its venv is not on PATH (the
    # configs below name it too, but not every kind of worker reads them)
    saved_python = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]").appName("lodarrow-tests")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
        # a short-lived test JVM: start quickly rather than optimise long loops
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for key, value in (("PYTHONPATH", saved), ("PYSPARK_PYTHON", saved_python)):
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(autouse=True, scope="session")
def _lengths_cache_in_tmp(tmp_path_factory):
    """The session's lengths cache (docs/training.md#lengths-cache): a temporary directory,
    never the user's ``~/.cache/lodarrow`` (subprocesses inherit it)."""
    old = os.environ.get("LODARROW_CACHE_DIR")
    os.environ["LODARROW_CACHE_DIR"] = str(tmp_path_factory.mktemp("lengths-cache"))
    yield
    if old is None:
        os.environ.pop("LODARROW_CACHE_DIR", None)
    else:
        os.environ["LODARROW_CACHE_DIR"] = old


def _holds_lodarrow(entry):
    return os.path.isfile(os.path.join(os.path.realpath(entry or os.getcwd()), "lodarrow",
                                       "__init__.py"))


def _other_lodarrow_first():
    """Where a process this one spawns would import a lodarrow other than the one under test.

    A spawned process (multiprocessing, DataLoader workers, ``python -c`` children) starts
    with this process's ``sys.path`` or its ``PYTHONPATH``: the first entry of either that
    holds a ``lodarrow`` package must be the tested one's folder (or there is none).
    """
    import lodarrow

    tested = os.path.dirname(os.path.dirname(os.path.realpath(lodarrow.__file__)))
    found = []
    for where, entries in (("sys.path", sys.path),
                           ("PYTHONPATH", os.environ.get("PYTHONPATH", "").split(os.pathsep))):
        for entry in entries:
            if (entry or where == "sys.path") and _holds_lodarrow(entry):
                if os.path.realpath(entry or os.getcwd()) != tested:
                    found.append(f"{where} entry {entry!r}")
                break
    return found


def pytest_collection_finish(session):
    """A module that puts another lodarrow first while it is collected fails the session."""
    found = _other_lodarrow_first()
    if found:
        raise pytest.UsageError(f"after collection, {found} holds a lodarrow that is not the "
                                f"one under test: spawned processes would import it")


@pytest.fixture(autouse=True)
def _sys_path_left_as_found():
    """Fail a test that leaves a directory holding a ``lodarrow`` package on ``sys.path``, or
    a path or ``PYTHONPATH`` by which spawned processes would import another lodarrow.

    Spawned processes (multiprocessing, DataLoader workers) start with the parent's
    ``sys.path``: where a source checkout without its compiled kernels came first, every worker
    of every later test imported that one and died (CI's floor stage hung so in
    ``multiprocessing.Pool.map``).  Entries a library adds on import are not flagged.
    """
    before = collections.Counter(sys.path)
    yield
    added = collections.Counter(sys.path) - before
    shadowing = [p for p in added if _holds_lodarrow(p)]
    for p in shadowing:  # the test's insertions come first: drop those, keep the rest
        for _ in range(added[p]):
            sys.path.remove(p)
    found = [f"sys.path entry {p!r}" for p in shadowing] + _other_lodarrow_first()
    if found:
        pytest.fail(f"the test left {found}: processes it or later tests spawn would import "
                    f"the lodarrow there, not the one under test")


@pytest.fixture(scope="session")
def s3_endpoint():
    """An S3-compatible server (moto's server mode) on 127.0.0.1, on a free port, for the
    session: its endpoint URL.  Skipped cleanly without ``moto[server]``."""
    server = pytest.importorskip("moto.server", reason="needs moto[server] (the test extra)")
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    # port 0: the server binds a free port itself (a port found free and bound later could
    # be taken in between by another process, and the server's start would wait forever)
    srv = server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    port = srv.get_host_and_port()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.stop()


@pytest.fixture
def s3(s3_endpoint, monkeypatch):
    """``(filesystem, bucket)``: a fresh bucket on the local S3 server, with the environment
    pyarrow reads set so that ``s3://bucket/...`` URIs reach it (and nothing else: no
    instance metadata, no AWS)."""
    import uuid

    import pyarrow.fs as pafs

    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": s3_endpoint, "AWS_ENDPOINT_URL_S3": s3_endpoint,
                       "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    fs = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                           endpoint_override=s3_endpoint.split("://")[1], scheme="http",
                           allow_bucket_creation=True, allow_bucket_deletion=True)
    bucket = f"lodarrow-{uuid.uuid4().hex[:12]}"
    fs.create_dir(bucket)
    yield fs, bucket
    fs.delete_dir(bucket)
