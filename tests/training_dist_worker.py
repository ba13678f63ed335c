"""The ranks of tests/test_training_distributed.py: ``python training_dist_worker.py CONFIG``.

The launcher (as torchrun's elastic agent) imports torch and lodarrow once, then starts each
run's ranks as forked processes (an interpreter start and a torch import per rank would cost
the CI machine more than the test itself), waits for them with a deadline, and starts the next
run from the state the last one saved.  It makes no loader itself: a run knows only the state
file of the run before.

Each rank joins a gloo process group on 127.0.0.1 (rank 0 opens the TCP store on a free port
and publishes it in a file), makes ``la.batch_loader(...num_replicas=world, rank=rank)``,
resumes from a saved state when the config names one, and iterates
``DataLoader(loader.torch(), batch_size=None, num_workers=...)`` or torchdata's
``StatefulDataLoader``.  When the config asks it to stop, the ranks agree on a random step
(each draws one, ``all_reduce(MIN)``), save a checkpoint there and stop: the
``StatefulDataLoader``'s own state for a next run that resumes through it (on another world:
the workers agree on the step received), else the loader's state
(``loader.state_dict(steps=...)``, or ``dataset.loader_state(...)`` of the
``StatefulDataLoader``'s state, which any worker count takes).  What the rank received (every batch's rows,
its padded cost, whether its values and label match its rows) goes to ``rank-<r>.json``.
"""

import json
import os
import sys
import time
from datetime import timedelta

import numpy as np


def _store(cfg, rank, world, timeout):
    import torch.distributed as dist

    port_file = os.path.join(cfg["out"], "port")
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, is_master=True, timeout=timeout,
                               wait_for_workers=False)  # they learn the port below
        with open(port_file + ".tmp", "w") as f:
            f.write(str(store.port))
        os.replace(port_file + ".tmp", port_file)  # the others never read half a number
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while not os.path.exists(port_file):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank {rank}: rank 0 published no store port in {timeout}")
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    return dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=timeout)


def rank_main(cfg, rank):
    world = cfg["world"]
    import torch
    import torch.distributed as dist

    import lodarrow as la

    timeout = timedelta(seconds=cfg["timeout"])
    dist.init_process_group("gloo", store=_store(cfg, rank, world, timeout), rank=rank,
                            world_size=world, timeout=timeout)
    loader = la.batch_loader(cfg["path"], "ids", num_replicas=world, rank=rank, to="torch",
                             extra_columns=["label"], **cfg["kw"])
    dataset = loader.torch()
    stateful = cfg["loader"] == "stateful"
    if stateful:
        from torchdata.stateful_dataloader import StatefulDataLoader

        dl = StatefulDataLoader(dataset, batch_size=None, num_workers=cfg["num_workers"],
                                timeout=cfg["timeout"] if cfg["num_workers"] else 0)
    else:
        dl = torch.utils.data.DataLoader(dataset, batch_size=None,
                                         num_workers=cfg["num_workers"],
                                         timeout=cfg["timeout"] if cfg["num_workers"] else 0)
    if cfg["state"] is not None:
        with open(cfg["state"]) as f:
            saved = json.load(f)
        if saved["kind"] == "stateful":
            dl.load_state_dict(saved["state"])  # the workers resume from their own states
            # the main process's loader learns the position too (len, the next state)
            loader.load_state_dict(dataset.loader_state(saved["state"]))
        else:
            loader.load_state_dict(saved["state"])
    start = loader.state_dict()["cursor"]
    remaining = len(loader) - start
    stop = None
    if cfg["stop"]:
        # every rank draws a step; the smallest is where all of them checkpoint
        mine = np.random.default_rng([cfg["seed"], rank]).integers(1, max(remaining, 2))
        agreed = torch.tensor([int(mine)], dtype=torch.int64)
        dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
        stop = int(agreed.item())
    rows, costs, bad = [], [], []
    it = iter(dl)
    for batch in it:
        r = batch["rows"].numpy()
        lengths = batch["lengths"].numpy()
        values = batch["values"].numpy()
        rows.append(r.tolist())
        costs.append(int(values.size))  # the batch's slots, padding included
        ok = np.array_equal(batch["label"].numpy(), r) and all(
            np.array_equal(values[k, :lengths[k]], np.arange(row, row + lengths[k]))
            for k, row in enumerate(r))
        if not ok:
            bad.append(len(rows) - 1)
        if stop is not None and len(rows) == stop:
            break
    state = None
    if stop is not None and stateful:  # torchdata's own state, as a checkpoint keeps it
        state = {"kind": "stateful", "state": dl.state_dict()}
        if cfg["next"] != "stateful":  # the next run takes the loader's own state
            state = {"kind": "loader", "state": dataset.loader_state(state["state"])}
    elif stop is not None:  # the step counter the training loop keeps
        state = {"kind": "loader", "state": loader.state_dict(steps=start + len(rows))}
    del it  # the workers stop (they prefetched past the checkpoint: that is the point)
    steps = torch.tensor([len(rows)], dtype=torch.int64)
    every = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(every, steps)
    out = {"rank": rank, "world": world, "start": start, "len": len(loader), "stop": stop,
           "rows": rows, "costs": costs, "bad": bad, "state": state,
           "steps_all_ranks": [int(t.item()) for t in every]}
    path = os.path.join(cfg["out"], f"rank-{rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)
    dist.barrier()
    dist.destroy_process_group()


def launch(config_path):
    """Run every run of the config one after the other; exit 1 when a rank fails or a run
    passes its deadline (its ranks are killed)."""
    import multiprocessing

    import pyarrow.parquet  # noqa: F401  (imported once, here: the ranks fork from this)
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401
    import torch.utils.data  # noqa: F401

    import lodarrow  # noqa: F401

    with open(config_path) as f:
        config = json.load(f)
    ctx = multiprocessing.get_context("fork")
    state = None
    for i, run in enumerate(config["runs"]):
        out = os.path.join(config["out"], run["name"])
        os.makedirs(out)
        following = config["runs"][i + 1]["loader"] if i + 1 < len(config["runs"]) else None
        cfg = dict(config, **run, out=out, state=state, seed=config["seed"] + i,
                   next=following)
        procs = [ctx.Process(target=rank_main, args=(cfg, r), name=f"{run['name']}-rank{r}")
                 for r in range(run["world"])]
        for p in procs:
            p.start()
        deadline = time.monotonic() + config["run_timeout"]
        for p in procs:
            p.join(max(deadline - time.monotonic(), 0))
        late = [p.name for p in procs if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        if late:
            print(f"launcher: {late} still running after {config['run_timeout']} s: killed",
                  flush=True)
            sys.exit(1)
        failed = [(p.name, p.exitcode) for p in procs if p.exitcode != 0]
        if failed:
            print(f"launcher: ranks failed: {failed}", flush=True)
            sys.exit(1)
        if run["stop"]:
            with open(os.path.join(out, "rank-0.json")) as f:
                saved = json.load(f)["state"]
            state = os.path.join(out, "state.json")
            with open(state, "w") as f:
                json.dump(saved, f)
        print(f"launcher: {run['name']} done", flush=True)


if __name__ == "__main__":
    launch(sys.argv[1])
