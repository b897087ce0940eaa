"""The GPU a recipe's grid is sized for: its SM count (asked of PyTorch once per device), and
the count assumed where no device is known (a compile on a machine without a GPU)."""

from __future__ import annotations

SMS = 132  # an H100's and H200's SMs

_sms: dict[int, int] = {}


def device_sms(torch, device) -> int:
    """The SMs of a CUDA tensor's GPU (asked once per GPU); SMS for another device."""
    if device.type != "cuda":
        return SMS
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sms:
        _sms[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _sms[index]


__all__ = ["SMS", "device_sms"]
