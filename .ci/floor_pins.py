"""Print ``name==floor`` for each dependency whose lowest declared version CI's floor stage
installs: the runtime dependencies, the build requirements and the test-core extra's pandas
and polars, each read from pyproject.toml (``name>=X`` becomes ``name==X``)."""

import re
import sys
import tomllib

FROM_TEST_CORE = {"pandas", "polars"}

with open(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml", "rb") as fh:
    pyproject = tomllib.load(fh)
build = pyproject["build-system"]["requires"]
# the build's numpy is pinned by the runtime floor (the extensions then build against it)
build = [r for r in build if not r.startswith("numpy")]
runtime = pyproject["project"]["dependencies"]
core = [r for r in pyproject["project"]["optional-dependencies"]["test-core"]
        if re.match(r"[\w-]+", r).group(0) in FROM_TEST_CORE]
for req in runtime + build + core:
    m = re.fullmatch(r"([\w-]+)(\[[\w,]+\])?\s*>=\s*([\w.]+)", req)
    if not m:
        sys.exit(f"floor_pins: {req!r} has no plain >= floor")
    print(f"{m.group(1)}=={m.group(3)}")
