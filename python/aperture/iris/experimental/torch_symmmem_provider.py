"""``iris.experimental.torch_symmmem_provider``: the other spelling some Iris versions import the
torch symmetric-memory provider by; the same module's objects."""

from .torch_symm_mem_provider import SymmetricAddressMap, TorchSymmMemProvider

__all__ = ["TorchSymmMemProvider", "SymmetricAddressMap"]
