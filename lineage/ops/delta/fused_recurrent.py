"""One decoding token of KDA / Gated DeltaNet / DeltaNet, in one kernel launch.

Forward only: there is no backward.

    S = Diag(e^g) S                   (KDA: row i scaled by e^{g[i]}; per-head gate: all of S)
    u = beta (v - k S)                (V,)
    S = S + k^T u                     (K, V), written back in place
    o = scale q S                     (V,)
    r = k S (after the decay)         (V,), optional: the read-back the app observes

The state is fp32 (B, H, K, V) and is read and written exactly once: at large batch the
kernel is a copy of the state, so its speed is the device's copy bandwidth. At batch 1 it is
launch bound, so the launcher checks a call signature once, allocates nothing but o, and
launches the compiled kernel directly once it has one.
"""
from __future__ import annotations

import inspect
from typing import Optional

import torch
import triton
import triton.language as tl


@triton.jit
def _kda_step_kernel(q, k, v, g, beta, S, o, r, scale,
                     K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                     GATE: tl.constexpr, READ: tl.constexpr):
    """One (batch, head) and one block of BV state columns per program.
    q, k, g: (B*H, K); v, o, r: (B*H, V); beta: (B*H,); S: (B*H, K, V) fp32, updated in place.
    GATE: 0 none, 1 one log decay per head (g (B*H,)), 2 one per key channel.
    READ: also store r = k S after the decay and before the write (what the app shows)."""
    i_bh, i_v = tl.program_id(0), tl.program_id(1)
    i_bh = i_bh.to(tl.int64)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    p_S = S + (i_bh * K + o_k[:, None]) * V + o_v[None, :]                       # (BK, BV)
    m_S = m_k[:, None] & m_v[None, :]
    # evict_first on the state (read once, written once): at large batch the kernel is a copy
    # of the state, and the hint is what brings it to the copy ceiling (BENCHMARKS.md)
    b_S = tl.load(p_S, mask=m_S, other=0., eviction_policy="evict_first")          # (BK, BV) fp32
    b_q = tl.load(q + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32) * scale   # (BK,)
    b_k = tl.load(k + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32)           # (BK,)
    b_v = tl.load(v + i_bh * V + o_v, mask=m_v, other=0.).to(tl.float32)           # (BV,)
    b_beta = tl.load(beta + i_bh).to(tl.float32)
    if GATE == 2:
        b_S *= tl.exp(tl.load(g + i_bh * K + o_k, mask=m_k, other=0.).to(tl.float32))[:, None]
    elif GATE == 1:
        b_S *= tl.exp(tl.load(g + i_bh).to(tl.float32))
    b_r = tl.sum(b_k[:, None] * b_S, 0)                                            # (BV,) read-back
    if READ:
        tl.store(r + i_bh * V + o_v, b_r.to(r.dtype.element_ty), mask=m_v)
    b_u = b_beta * (b_v - b_r)                                                     # (BV,)
    b_S += b_k[:, None] * b_u[None, :]
    tl.store(p_S, b_S, mask=m_S, eviction_policy="evict_first")
    tl.store(o + i_bh * V + o_v, tl.sum(b_q[:, None] * b_S, 0).to(o.dtype.element_ty), mask=m_v)


def _step_config(BH: int, K: int, V: int) -> tuple[int, int, int]:
    """(BK, BV, num_warps). Batch 1 wants many small programs (BV = 16), a large batch wide
    tiles (BV = 64): the fastest measured on the H200 at K = V = 128 (BENCHMARKS.md)."""
    BK = max(16, triton.next_power_of_2(K))
    BV = min(16 if BH < 512 else 64, max(16, triton.next_power_of_2(V)))
    return BK, BV, (4 if BK * BV <= 8192 else 8)


# At batch 1 the kernel takes ~2 us of GPU time and the host path is the whole cost, so it is
# kept short:
# - Shapes, dtypes and tiles are checked once per call signature (the shapes and dtypes of
#   every argument, the tiles, the device), which then maps to a plan: the checks of a
#   repeated signature cost one tuple and one dict lookup. Contiguity, devices and pointer
#   alignment are properties of each call's tensors and are checked on every call.
# - After the first launch of a plan, calls go straight to the compiled kernel's launcher with
#   the pointers as plain ints: Triton's generic path (argument binding, specialization, a
#   data_ptr() call and a driver pointer query per tensor) costs several times the kernel.
#   The plan holds everything Triton specializes on here: device, dtypes, sizes, tiles, and
#   16-byte alignment of the pointers (the direct launch is used only when all are aligned;
#   torch's allocations always are). Launch hooks (profilers) are bypassed on this path.
_PLANS: dict = {}       # signature -> [gate, scale, gx, gy, K, V, BK, BV, warps, READ, direct]
_STREAM: list = []      # [the current-stream getter] while the direct launch is in use
_DIRECT = 10            # plan[_DIRECT]: (launch, head, compiled); None: not yet; False: never

# Triton versions whose C launch entry point takes the arguments in the order used below
# (checked on the H200 with triton 3.6.0); any other version goes through the Python wrapper.
_RAW_ENTRY_VERSIONS = ("3.6.",)


def _direct_launcher(compiled):
    """(launch, head, compiled) so that launch(gx, gy, 1, stream, *head, *args) starts
    `compiled` (kept in the tuple: a CompiledKernel unloads its module when collected).
    Triton 3.6's C entry point itself when its Python wrapper would add nothing (no scratch
    memory), else the wrapper (Triton 3.x with ``CompiledKernel.run``)."""
    run = compiled.run
    if (triton.__version__.startswith(_RAW_ENTRY_VERSIONS)
            and list(inspect.signature(type(run).__call__).parameters)
            == ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]
            and getattr(run, "launch", None) is not None
            and not getattr(run, "global_scratch_size", 1) and not getattr(run, "profile_scratch_size", 1)):
        # the wrapper would add (cooperative, pdl, global scratch, profile scratch) and call this
        head = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                compiled.packed_metadata, None, None, None)
        return run.launch, head, compiled
    return run, (compiled.function, compiled.packed_metadata, None, None, None), compiled


def _plan(q, k, v, g, beta, state, read, config) -> list:
    """Checks the shapes and dtypes of one call signature (ValueError naming the problem) and
    returns its plan: [gate, default scale, grid x, grid y, K, V, BK, BV, warps, READ, direct]."""
    if q.dim() != 3 or v.dim() != 3:
        raise ValueError(f"kda_step: q must be (B, H, K) and v (B, H, V); got {tuple(q.shape)}, {tuple(v.shape)}")
    B, H, K = q.shape
    V = v.shape[2]
    bh = (B, H)
    if k.shape != q.shape or v.shape[:2] != bh or beta.shape != bh:
        raise ValueError(f"kda_step: want q, k (B, H, K), v (B, H, V), beta (B, H); got "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}, {tuple(beta.shape)}")
    if state.shape != (B, H, K, V) or state.dtype != torch.float32:
        raise ValueError(f"kda_step: state must be a contiguous float32 (B, H, K, V) = {(B, H, K, V)}; "
                         f"got {state.dtype} {tuple(state.shape)}")
    if g is None:
        gate = 0
    elif g.shape == q.shape:
        gate = 2
    elif g.shape == bh:
        gate = 1
    else:
        raise ValueError(f"kda_step: g must be (B, H, K) or (B, H); got {tuple(g.shape)}")
    if read is not None and read.shape != v.shape:
        raise ValueError(f"kda_step: read must be a contiguous (B, H, V) = {tuple(v.shape)}; got {tuple(read.shape)}")
    if config is None:
        config = _step_config(B * H, K, V)
    elif (len(config) != 3 or not all(isinstance(c, int) and c >= 1 for c in config)
          or config[0] < K or config[0] & (config[0] - 1) or config[1] & (config[1] - 1)):
        # one program holds all K rows of its block of S: BK must cover K
        raise ValueError(f"kda_step: config (BK, BV, warps) needs powers of two with BK >= K = {K}; got {config}")
    BK, BV, warps = config
    return [gate, K ** -0.5, B * H, (V + BV - 1) // BV, K, V, BK, BV, warps, read is not None, None]


def _check_contiguous(q, k, v, g, beta, state, read) -> None:
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous() and beta.is_contiguous()
            and state.is_contiguous() and (g is None or g.is_contiguous())
            and (read is None or read.is_contiguous())):
        raise ValueError("kda_step: q, k, v, g, beta, state and read must be contiguous")


def _check(q, k, v, g, beta, state, read, config) -> list:
    """The plan of this call's signature (made and cached on its first call); raises
    ValueError for tensors that are not contiguous or not on one device."""
    _check_contiguous(q, k, v, g, beta, state, read)
    dev = q.get_device() if q.is_cuda else -1              # -1: Triton's CPU interpreter
    if config is not None:
        config = tuple(config)                             # part of the signature: hashable
    sig = (q.shape, k.shape, v.shape, beta.shape, state.shape, q.dtype, k.dtype, v.dtype, beta.dtype,
           state.dtype, None if g is None else (g.shape, g.dtype),
           None if read is None else (read.shape, read.dtype), config, dev)
    plan = _PLANS.get(sig)
    if plan is None:
        plan = _PLANS[sig] = _plan(q, k, v, g, beta, state, read, config)
    if (k.get_device() != dev or v.get_device() != dev or beta.get_device() != dev or state.get_device() != dev
            or (g is not None and g.get_device() != dev) or (read is not None and read.get_device() != dev)):
        raise ValueError("kda_step: q, k, v, g, beta, state and read must be on one device")
    return plan


def _launch(plan, q, k, v, g, beta, state, o, r, scale) -> None:
    """Starts the kernel for a checked call: directly once the plan has its compiled kernel
    and every pointer is 16-byte aligned, else through Triton's generic launch (which
    compiles on first use, and is the only path under the CPU interpreter)."""
    gate, _, gx, gy, K, V, BK, BV, warps, READ, direct = plan
    if not q.is_cuda:
        _kda_step_kernel[(gx, gy)](q, k, v, g, beta, state, o, r, scale, K, V, BK, BV, gate, READ, num_warps=warps)
        return
    ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), g.data_ptr(), beta.data_ptr(), state.data_ptr(),
            o.data_ptr(), r.data_ptr())
    aligned = not (ptrs[0] | ptrs[1] | ptrs[2] | ptrs[3] | ptrs[4] | ptrs[5] | ptrs[6] | ptrs[7]) & 15
    if direct and aligned:
        launch, head, _ = direct
        try:
            launch(gx, gy, 1, _STREAM[0](q.get_device()), *head, *ptrs, scale, K, V, BK, BV, gate, READ)
            return
        except (TypeError, SystemError, ValueError):   # arguments rejected before any launch
            direct = plan[_DIRECT] = False
    compiled = _kda_step_kernel[(gx, gy)](q, k, v, g, beta, state, o, r, scale, K, V, BK, BV, gate, READ,
                                          num_warps=warps)
    # cache only a launch made on the tensors' own device: Triton loaded `compiled` there
    if aligned and direct is None and q.get_device() == torch.cuda.current_device():
        try:
            if not _STREAM:
                _STREAM.append(triton.runtime.driver.active.get_current_stream)
            plan[_DIRECT] = _direct_launcher(compiled)
        except Exception:  # noqa: BLE001 - Triton's internals moved: keep the generic launch
            plan[_DIRECT] = False


def kda_step(q, k, v, g, beta, state, *, scale=None, read=None, config=None):
    """One token of KDA (or Gated DeltaNet with g (B, H), or DeltaNet with g None), forward
    only (no backward). q, k (B, H, K); v (B, H, V); g (B, H, K), (B, H) or None; beta (B, H);
    state (B, H, K, V) fp32 contiguous, updated IN PLACE. One kernel launch.
    Returns o (B, H, V) in v's dtype: the read after this token's write.
    ``read``: an optional contiguous (B, H, V) tensor that receives k S after the decay and
    before the write (the recall the delta rule corrects), in the same launch.
    ``config`` = (BK, BV, num_warps) overrides the tile choice (for benchmarks).
    Under torch.compile the call goes through the custom op ``torch.ops.lineage.kda_step``,
    so the compiler keeps this kernel inside the graph it builds."""
    if _compiling():
        if config is not None:
            raise ValueError("kda_step: config= is for benchmarks; under torch.compile the op picks its tiles")
        _check_contiguous(q, k, v, g, beta, state, read)
        gate, scale0 = _plan(q, k, v, g, beta, state, read, None)[:2]
        _op_ready()
        return torch.ops.lineage.kda_step(q, k, v, q if g is None else g, beta, state, read,
                                          scale0 if scale is None else float(scale), gate)
    plan = _check(q, k, v, g, beta, state, read, config)
    o = torch.empty_like(v)
    # g = q when there is no gate and r = o without read=: pointers the kernel never reads
    # (GATE = 0) or writes (READ off)
    _launch(plan, q, k, v, q if g is None else g, beta, state, o, o if read is None else read,
            plan[1] if scale is None else float(scale))
    return o


# torch.compile traces through the custom op below (torch >= 2.6 has torch.library.triton_op);
# older torch graph-breaks at the eager launcher instead
_IS_COMPILING = torch.compiler.is_compiling if hasattr(torch.library, "triton_op") else None
_compiling = _IS_COMPILING or (lambda: False)


_TRACEABLE = isinstance(_kda_step_kernel, triton.runtime.JITFunction)   # False under TRITON_INTERPRET=1
_OP: list = []          # [True] once torch.ops.lineage.kda_step is registered


def _register_op() -> None:
    """``torch.ops.lineage.kda_step``: the same launch written so torch.compile can trace it
    (torch.library.triton_op, torch >= 2.6). Inductor then keeps our kernel in the graph it
    builds, fused work around it, instead of stopping at an opaque Python launcher."""
    from torch.library import triton_op, wrap_triton

    @triton_op("lineage::kda_step", mutates_args={"state", "read"})
    def _op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
            state: torch.Tensor, read: Optional[torch.Tensor], scale: float, gate: int) -> torch.Tensor:
        B, H, K = q.shape
        V = v.shape[2]
        BK, BV, warps = _step_config(B * H, K, V)
        o = torch.empty_like(v)
        # the interpreter's function (TRITON_INTERPRET=1) is refused by torch 2.11's
        # wrap_triton; later torch hands it back unwrapped, as here: nothing compiles there
        kernel = wrap_triton(_kda_step_kernel) if _TRACEABLE else _kda_step_kernel
        kernel[(B * H, triton.cdiv(V, BV))](
            q, k, v, g, beta, state, o, o if read is None else read, scale, K, V, BK, BV, gate,
            read is not None, num_warps=warps)
        return o


def _op_ready() -> bool:
    """Registers the op on first use. Registering imports torch's compiler stack (about a
    second, more on a slow disk), which an eager caller never needs: the app's first frame
    would wait for it. So it happens at the first call under torch.compile instead."""
    if not _OP:
        _register_op()
        _OP.append(True)
    return True


# torch.compile calls _op_ready while it traces kda_step instead of tracing into it, so the
# op exists before the graph names it. This is the mark torch.compiler.assume_constant_result
# sets; the decorator itself would import torch._dynamo now, the cost deferred above.
_op_ready._dynamo_marked_constant = True


def kda_step_op():
    """``torch.ops.lineage.kda_step`` (q, k, v, g, beta, state, read, scale, gate), the custom
    op torch.compile traces kda_step into, registered on first use. g = q when gate is 0."""
    if _IS_COMPILING is None:
        raise RuntimeError("kda_step_op needs torch.library.triton_op (torch >= 2.6)")
    _op_ready()
    return torch.ops.lineage.kda_step
