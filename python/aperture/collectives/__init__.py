"""aperture's collectives on tensors: the C++ Communicator (aperture/collectives), on torch's
current stream. Also aperture.Communicator."""

from ._communicator import Communicator

__all__ = ["Communicator"]
