"""The one contiguity rule every buffer description shares
(__cuda_array_interface__ strides in bytes, DLPack strides in elements)."""


def require_c_contiguous(shape, strides, unit, what):
    """The element count of shape; raises ValueError naming what unless
    strides (None: compact) are those of a C-contiguous array, in steps of
    unit (the item size for byte strides, 1 for element strides).
    Dimensions of one element may have any stride."""
    count = 1
    for n in shape:
        count *= n
    if strides is None or count <= 1:
        return count
    step = unit
    for n, stride in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if n != 1 and stride != step:
            raise ValueError(f"{what} is not C-contiguous (shape {tuple(shape)}, strides {tuple(strides)})")
        step *= n
    return count
