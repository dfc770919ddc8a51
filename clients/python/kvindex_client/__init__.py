"""kvindex_client - a client of the kvindex coordinator's HTTP API for
routers (docs/api.md), standard library only.

    from kvindex_client import Client
    c = Client(["http://coord-0:8080", "http://coord-1:8080"], timeout=0.5)
    best = c.best_rank("my-model", token_ids, top_k=4)
"""
from .client import Client, MMFeature
from .results import (Answer, ClientError, Group, Instance, KvindexError,
                      Registration, Routed, Unreachable, Worker)

__all__ = ["Client", "MMFeature", "Answer", "Worker", "Group", "Routed",
           "Instance", "Registration", "ClientError", "KvindexError",
           "Unreachable"]
__version__ = "0.1.0"
