"""The internal control plane between ranks (proto/control.proto): rank 0 runs ControlMaster at
--master_node_addr; every rank (rank 0 included) talks to it through a RankAgent."""
from mtpserve.control.agent import RankAgent
from mtpserve.control.master import ControlMaster

__all__ = ["ControlMaster", "RankAgent"]
