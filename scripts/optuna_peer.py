#!/usr/bin/env python3
"""Optuna's side of a search shared with tradebot workers (tests/tune_cluster.rs, `make search-cluster`).

  optuna_peer.py proxy PORT DB_URL        Optuna's gRPC storage proxy over the RDB at DB_URL, on 127.0.0.1:PORT
  optuna_peer.py worker PORT STUDY N      a Python Optuna worker: N trials of a tiny objective (TPE); creates
                                          the study (maximising) if it does not exist
  optuna_peer.py dump PORT STUDY          the study as Optuna reads it, one JSON object on stdout
  optuna_peer.py lossy-proxy PORT DB_URL  the proxy, except that it makes the first trial it is asked to create
                                          and then answers UNAVAILABLE, as a proxy killed after committing would
                                          (tests/tune_cluster.rs: the worker must find that trial by its token)
"""
import json
import sys
import time

import optuna
from optuna.storages import GrpcStorageProxy


def proxy(port, db_url):
    storage = optuna.storages.get_storage(db_url)
    print(f"Optuna gRPC storage proxy on 127.0.0.1:{port} over {db_url}", flush=True)
    optuna.storages.run_grpc_proxy_server(storage, host="127.0.0.1", port=int(port))


def lossy_proxy(port, db_url):
    # Optuna's own servicer (4.6, pinned by the Makefile), with the first CreateNewTrial's answer lost.
    from concurrent.futures import ThreadPoolExecutor

    import grpc
    from optuna.storages._grpc import servicer
    from optuna.storages._grpc.auto_generated import api_pb2_grpc

    class Lossy(servicer.OptunaStorageProxyService):
        lost = False

        def CreateNewTrial(self, request, context):
            answer = super().CreateNewTrial(request, context)
            if not Lossy.lost:
                Lossy.lost = True
                context.abort(grpc.StatusCode.UNAVAILABLE, "the answer was lost (lossy-proxy)")
            return answer

    server = grpc.server(ThreadPoolExecutor(max_workers=10))
    api_pb2_grpc.add_StorageServiceServicer_to_server(Lossy(optuna.storages.get_storage(db_url)), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"lossy Optuna gRPC storage proxy on 127.0.0.1:{port} over {db_url}", flush=True)
    server.wait_for_termination()


def worker(port, study_name, n):
    storage = GrpcStorageProxy(host="127.0.0.1", port=int(port))
    study = optuna.create_study(study_name=study_name, storage=storage, direction="maximize",
                                load_if_exists=True, sampler=optuna.samplers.TPESampler(seed=3))

    def objective(trial):
        x = trial.suggest_float("py_x", -1.0, 1.0)
        time.sleep(0.5)
        return -x * x

    study.optimize(objective, n_trials=int(n))
    print(f"python worker: {len(study.trials)} trials in {study_name}", flush=True)


def dump(port, study_name):
    storage = GrpcStorageProxy(host="127.0.0.1", port=int(port))
    study = optuna.load_study(study_name=study_name, storage=storage)
    trials = [{
        "number": t.number, "state": t.state.name, "params": t.params, "value": t.value,
        "distributions": {k: optuna.distributions.distribution_to_json(d) for k, d in t.distributions.items()},
        "intermediate_values": t.intermediate_values, "user_attrs": t.user_attrs, "system_attrs": t.system_attrs,
    } for t in study.get_trials(deepcopy=False)]
    try:
        best = {"number": study.best_trial.number, "value": study.best_value}
    except ValueError:
        best = None
    print(json.dumps({"trials": trials, "best": best, "system_attrs": study.system_attrs}))


if __name__ == "__main__":
    cmds = {"proxy": proxy, "lossy-proxy": lossy_proxy, "worker": worker, "dump": dump}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
