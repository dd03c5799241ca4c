from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import dask.array as da
from dask.delayed import Delayed

from . import Image, PathLike

def halo(function: str, *, channels: int = ..., **kwargs: Any) -> Tuple[int, int]: ...
def mean(x: da.Array, **kwargs: Any) -> da.Array: ...
def box_sum(x: da.Array, **kwargs: Any) -> da.Array: ...
def gaussian(x: da.Array, **kwargs: Any) -> da.Array: ...
def local_variance(x: da.Array, **kwargs: Any) -> da.Array: ...
def stitch_delayed(
    sequences: Sequence[Union[PathLike, Sequence[PathLike], Sequence[Image]]],
    *,
    outputs: Optional[Sequence[PathLike]] = ...,
    return_panoramas: bool = ...,
    **kwargs: Any,
) -> List[Delayed]: ...
def stitch_batch(
    sequences: Sequence[Union[PathLike, Sequence[PathLike], Sequence[Image]]],
    *,
    outputs: Optional[Sequence[PathLike]] = ...,
    return_panoramas: bool = ...,
    scheduler: Any = ...,
    **kwargs: Any,
) -> List[Union[Dict[str, Any], Tuple[Image, Dict[str, Any]]]]: ...
