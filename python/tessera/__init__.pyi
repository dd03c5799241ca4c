# Type stubs of tessera. Defaults are `...` here: the values are the Rust library's
# (`tessera.defaults()`, and each function's signature at run time).
import os
from typing import Any, Dict, List, Literal, Optional, Protocol, Sequence, Tuple, TypedDict, Union

import numpy as np
import numpy.typing as npt

__version__: str
BACKENDS: Tuple[str, ...]

Gray = Union[npt.NDArray[np.uint8], npt.NDArray[np.uint16], npt.NDArray[np.float32]]
"""A gray image: uint8, uint16 or float32 of shape (H, W)."""
Image = Union[Gray, npt.NDArray[np.uint8]]
"""A gray image, or RGBA uint8 of shape (H, W, 4)."""
Backend = Literal["cpu", "cuda", "auto"]
Border = str
"""'reflect101', 'replicate', 'normalize' or 'constant:V'."""
PathLike = Union[str, os.PathLike]

class SupportsDLPack(Protocol):
    """An array of another library lent without a copy (PyTorch, CuPy, JAX, NumPy)."""
    def __dlpack__(self, *, stream: Optional[int] = ...) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class CudaImage:
    """An image in GPU memory: the result of an operation on a CUDA array or a CudaImage
    (or of to_device). Operations take it without a transfer; CuPy and PyTorch take it
    without a copy (DLPack, __cuda_array_interface__); numpy() copies it to the host."""
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    def numpy(self) -> Image: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = ...,
        max_version: Optional[Tuple[int, int]] = ...,
        dl_device: Optional[Tuple[int, int]] = ...,
        copy: Optional[bool] = ...,
    ) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...

ImageIn = Union[Image, CudaImage, SupportsDLPack]
"""A NumPy image, a CudaImage, or an array of another library with __dlpack__ (host
memory: read in place; CUDA memory: read in place on the GPU)."""
Matrix = Union[npt.NDArray[np.float32], CudaImage, SupportsDLPack]
"""A float32 (H, W) matrix: NumPy, a CudaImage, or another library's array."""
ImageOut = Union[Image, CudaImage]
"""A new NumPy array for a host input, a new CudaImage for a device input."""

def to_device(image: Union[Image, CudaImage, SupportsDLPack], /, *, backend: Backend = ...) -> CudaImage:
    """A copy of a host image in GPU memory (a CudaImage is returned as it is)."""

class BackendInfo(TypedDict):
    name: str
    fallback: Optional[str]

class GlareReport(TypedDict):
    spots: int
    pixels: int
    brightness: float
    min_contrast: float
    full_scale: float

class StereoStats(TypedDict):
    valid: int
    rejected_uniqueness: int
    rejected_lr: int
    filled: int
    tiles: int
    peak_bytes: int
    p1: int
    p2: int

def defaults(function: Optional[str] = ...) -> Dict[str, Any]: ...
def backend_info(backend: Backend = ..., single_thread: bool = ...) -> BackendInfo: ...
def mean(
    image: ImageIn,
    /,
    *,
    size: int = ...,
    width: Optional[int] = ...,
    height: Optional[int] = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> ImageOut:
    """Mean over the width x height window anchored at (width // 2, height // 2); exact
    rounded-half-up integer means for uint8 / uint16."""

def box_sum(
    image: Union[Gray, CudaImage, SupportsDLPack],
    /,
    *,
    size: int = ...,
    width: Optional[int] = ...,
    height: Optional[int] = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Union[npt.NDArray[np.uint32], npt.NDArray[np.float32], CudaImage]:
    """Window sums: exact uint32 for uint8 / uint16, float32 for float32."""

def gaussian(
    image: ImageIn,
    /,
    *,
    sigma: float = ...,
    radius: Optional[int] = ...,
    method: Literal["auto", "fir", "iir"] = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> ImageOut:
    """Gaussian blur: FIR (sampled, normalized weights, radius ceil(3 sigma)) or IIR."""

def gaussian_plan(
    sigma: float, radius: Optional[int] = ..., method: str = ..., channels: int = ...
) -> Tuple[str, Optional[int]]:
    """('fir', radius) or ('iir', None): what gaussian() runs for these parameters."""

def local_variance(
    image: ImageIn,
    /,
    *,
    method: Literal["usual", "koenig", "welford", "pairwise", "threewise", "recursive"] = ...,
    kernel: Literal["tent", "box"] = ...,
    radius: int = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Union[npt.NDArray[np.float32], CudaImage]:
    """sum w (p - mu)^2 / sum w over a tent (R = 2^k - 1) or box kernel; float32."""

def contrast(
    image: ImageIn,
    /,
    *,
    radii: Sequence[int] = ...,
    alpha: float = ...,
    gain_max: float = ...,
    gain_min: float = ...,
    noise: float = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> ImageOut:
    """Multi-scale local contrast enhancement from local mean and variance."""

def glare(
    image: ImageIn,
    /,
    *,
    mode: Literal["adaptive", "manual"] = ...,
    radii: Sequence[int] = ...,
    k_sigma: float = ...,
    brightness: float = ...,
    min_contrast: float = ...,
    max_saturation: float = ...,
    min_area: int = ...,
    max_area: int = ...,
    max_elongation: float = ...,
    grow: int = ...,
    fill_grow: int = ...,
    fill_iterations: int = ...,
    border: Border = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Tuple[ImageOut, Union[npt.NDArray[np.uint8], CudaImage], GlareReport]:
    """(corrected, mask with 255 on glare, report)."""

def register_pair(
    reference: Image,
    moving: Image,
    /,
    *,
    prediction: Tuple[float, float] = ...,
    rsz: int = ...,
    accept: Literal["adaptive", "fixed"] = ...,
    cthresh: float = ...,
    null_margin: float = ...,
    min_coefficient: float = ...,
    npts: int = ...,
    search_radius: int = ...,
    min_variance: Optional[float] = ...,
    method: Literal["log", "log-plain", "exhaustive"] = ...,
    no_refine: bool = ...,
    motion: Literal["similarity", "translation"] = ...,
    fit_scale: bool = ...,
    max_turn: float = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Dict[str, Any]:
    """NCC registration of a pair: {'shift': (x, y) or None, 'angle' (degrees), 'scale', 'reason', 'ncc', ...}."""

def stitch(
    frames: Union[PathLike, Sequence[PathLike], Sequence[Image]],
    /,
    *,
    rsz: int = ...,
    accept: Literal["adaptive", "fixed"] = ...,
    cthresh: float = ...,
    null_margin: float = ...,
    min_coefficient: float = ...,
    npts: int = ...,
    search_radius: int = ...,
    min_variance: Optional[float] = ...,
    method: Literal["log", "log-plain", "exhaustive"] = ...,
    no_refine: bool = ...,
    motion: Literal["similarity", "translation"] = ...,
    fit_scale: bool = ...,
    max_turn: float = ...,
    blend: Literal["overwrite", "average", "feather"] = ...,
    keyframe_shift: float = ...,
    no_quality: bool = ...,
    coarse: int = ...,
    no_grow: bool = ...,
    no_close_loops: bool = ...,
    no_whole_overlap: bool = ...,
    refine_every_pair: bool = ...,
    no_detect_zoom: bool = ...,
    frame_cache: int = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Tuple[Image, Dict[str, Any]]:
    """(panorama, report): the report is `tessera stitch --report`'s JSON as a dict."""

def stitch_grid(
    tiles: Union[None, PathLike, Sequence[PathLike], Sequence[Image]],
    /,
    *,
    grid: Optional[str] = ...,
    positions: Union[None, PathLike, Sequence[Tuple[float, float]]] = ...,
    tile_config: Optional[PathLike] = ...,
    overlap: float = ...,
    order: Literal["row", "column", "snake-row", "snake-column"] = ...,
    start: Literal["top-left", "top-right", "bottom-left", "bottom-right"] = ...,
    pixel_size: Optional[float] = ...,
    stage_error: float = ...,
    flatfield: Optional[str] = ...,
    darkfield: Optional[str] = ...,
    channels: int = ...,
    time_points: int = ...,
    cycles: int = ...,
    register_channel: int = ...,
    reuse_positions: bool = ...,
    rsz: int = ...,
    accept: Literal["adaptive", "fixed"] = ...,
    cthresh: float = ...,
    null_margin: float = ...,
    min_coefficient: float = ...,
    npts: int = ...,
    search_radius: int = ...,
    min_variance: Optional[float] = ...,
    method: Literal["log", "log-plain", "exhaustive"] = ...,
    no_refine: bool = ...,
    motion: Literal["similarity", "translation"] = ...,
    fit_scale: bool = ...,
    max_turn: float = ...,
    blend: Literal["overwrite", "average", "feather"] = ...,
    coarse: int = ...,
    frame_cache: int = ...,
    single_thread: bool = ...,
) -> Tuple[Image, Dict[str, Any]]:
    """(mosaic, report): the report is `tessera stitch --grid --report`'s JSON as a dict;
    with channels or time points the mosaic is (time_points, channels, H, W); with cycles
    (1, cycles * channels, H, W)."""

def synth_sequence(
    image: Image,
    /,
    *,
    frames: int = ...,
    width: int = ...,
    height: int = ...,
    zoom: float = ...,
    max_step: float = ...,
    noise: float = ...,
    gain_drift: float = ...,
    blur: int = ...,
    seed: int = ...,
) -> Tuple[List[Image], List[Tuple[float, float]]]:
    """(frames, true positions), as `tessera synth-seq`."""

def stereo(
    left: ImageIn,
    right: ImageIn,
    /,
    *,
    max_disp: int = ...,
    cost: Literal["census", "ad", "mi"] = ...,
    census_window: str = ...,
    mi_iterations: int = ...,
    mi_levels: int = ...,
    paths: Literal[4, 5, 8, 16] = ...,
    p1: Optional[int] = ...,
    p2: Optional[int] = ...,
    fixed_p2: bool = ...,
    uniqueness: int = ...,
    subpixel: bool = ...,
    lr_check: bool = ...,
    median: bool = ...,
    fill: bool = ...,
    tile: Optional[str] = ...,
    overlap: int = ...,
    max_mem: int = ...,
    backend: Backend = ...,
    single_thread: bool = ...,
) -> Tuple[Union[npt.NDArray[np.float32], CudaImage], StereoStats]:
    """SGM: (left disparity map with inf where invalid, stats). A pair on the GPU gives the map as a CudaImage."""

def matmul(
    a: Matrix, b: Matrix, /, *, backend: Backend = ..., single_thread: bool = ...
) -> Union[npt.NDArray[np.float32], CudaImage]:
    """a @ b in float32. Both on the host (a new NumPy array) or both on the GPU (a new CudaImage)."""

def mat_add(
    a: Matrix, b: Matrix, /, *, backend: Backend = ..., single_thread: bool = ...
) -> Union[npt.NDArray[np.float32], CudaImage]:
    """a + b in float32. Both on the host (a new NumPy array) or both on the GPU (a new CudaImage)."""

def load(path: PathLike, /) -> npt.NDArray[Any]:
    """An image file as an array (gray (H, W) or RGBA (H, W, 4))."""

def save(path: PathLike, image: Image, /) -> None:
    """An array to an image file (format from the extension; float32 needs .tif)."""
