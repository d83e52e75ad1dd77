// The host side of kda_step in C++: checks, allocation of o and the launch of the compiled
// Triton kernel in one call from Python.
//
// At batch 1 the kernel is ~2.4 us of GPU time and a call is all host time. In Python the
// launch path (checks, eight data_ptr() calls, torch.empty_like, Triton's C entry point with
// ~25 arguments) took 10-20 us on the H200's host; here it is one pybind call. The kernel is
// the one Triton compiled for the Python launcher: Python makes a plan (tiles, grid) on the
// first call of each signature, launches through Triton, and hands the compiled CUfunction to
// add_plan(). Later calls of that signature go through step() without touching Triton.
//
// No CUDA headers: the current stream comes from c10's device-guard interface, and
// cuLaunchKernel / cuFuncGetParamInfo from the already-loaded driver (dlopen), so this file
// builds against a CPU-only torch too (CI compiles it and checks the Python-facing contract).
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/utils/pybind.h>

namespace {

// CUDA driver API entry points, typed by hand (the signatures are the driver's ABI)
using LaunchFn = int (*)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, void* stream, void** params, void** extra);
using ParamInfoFn = int (*)(void* f, size_t index, size_t* offset, size_t* size);

LaunchFn g_launch = nullptr;
ParamInfoFn g_param_info = nullptr;   // CUDA >= 12.4 drivers; null: add_plan takes no plans
std::string g_driver_error;

bool load_driver() {
  if (g_launch) return true;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);   // the driver torch already loaded
  if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib) {
    const char* e = dlerror();
    g_driver_error = std::string("libcuda.so.1 not loadable: ") + (e ? e : "?");
    return false;
  }
  g_launch = reinterpret_cast<LaunchFn>(dlsym(lib, "cuLaunchKernel"));
  g_param_info = reinterpret_cast<ParamInfoFn>(dlsym(lib, "cuFuncGetParamInfo"));
  if (!g_launch) g_driver_error = "cuLaunchKernel not found in libcuda.so.1";
  return g_launch != nullptr;
}

// What a compiled kernel depends on, from the call's tensors:
// device, B, H, K, V, dtypes of q k v beta g read (-1: absent), gate kind (0 none, 1 head, 2 channel)
using Key = std::array<int64_t, 12>;

struct Plan {
  Key key;
  void* function;      // CUfunction, owned by Triton's CompiledKernel (Python keeps it alive)
  unsigned gx, gy, threads, shared;
  float scale0;        // K^-0.5
};
std::vector<Plan> g_plans;
constexpr size_t kMaxPlans = 256;

int64_t dtype_code(const std::optional<at::Tensor>& t) {
  return t ? static_cast<int64_t>(t->scalar_type()) : -1;
}

// The key, or nullopt when the call is not one a plan can take (the Python path then runs and
// raises the error that names the problem)
std::optional<Key> key_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const std::optional<at::Tensor>& g, const at::Tensor& beta,
                          const std::optional<at::Tensor>& read) {
  if (q.dim() != 3 || v.dim() != 3 || !q.is_cuda()) return std::nullopt;
  int64_t gate = 0;
  if (g) {
    if (g->dim() == 3) gate = 2;
    else if (g->dim() == 2) gate = 1;
    else return std::nullopt;
  }
  return Key{q.get_device(), q.size(0), q.size(1), q.size(2), v.size(2),
             static_cast<int64_t>(q.scalar_type()), static_cast<int64_t>(k.scalar_type()),
             static_cast<int64_t>(v.scalar_type()), static_cast<int64_t>(beta.scalar_type()),
             dtype_code(g), dtype_code(read), gate};
}

const Plan* find(const Key& key) {
  for (const Plan& p : g_plans)
    if (p.key == key) return &p;
  return nullptr;
}

bool same_device_contiguous(const at::Tensor& t, int64_t dev) {
  return t.is_cuda() && t.get_device() == dev && t.is_contiguous();
}

// Full check of a call whose key matched: shapes, devices, contiguity, 16-byte alignment (what
// Triton specialized the kernel on), and that the tensors' device is the current one (the
// CUfunction lives in that device's context)
bool eligible(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& g,
              const at::Tensor& beta, const at::Tensor& state, const std::optional<at::Tensor>& read,
              const Key& key) {
  const int64_t dev = key[0], B = key[1], H = key[2], K = key[3], V = key[4];
  if (!same_device_contiguous(q, dev) || !same_device_contiguous(k, dev) || !same_device_contiguous(v, dev) ||
      !same_device_contiguous(beta, dev) || !same_device_contiguous(state, dev))
    return false;
  if (k.sizes() != q.sizes() || v.size(0) != B || v.size(1) != H || beta.dim() != 2 || beta.size(0) != B ||
      beta.size(1) != H || state.scalar_type() != at::kFloat || state.dim() != 4 || state.size(0) != B ||
      state.size(1) != H || state.size(2) != K || state.size(3) != V)
    return false;
  if (g && (!same_device_contiguous(*g, dev) || g->size(0) != B || g->size(1) != H ||
            (g->dim() == 3 && g->size(2) != K)))
    return false;
  if (read && (!same_device_contiguous(*read, dev) || read->sizes() != v.sizes())) return false;
  uintptr_t bits = reinterpret_cast<uintptr_t>(q.data_ptr()) | reinterpret_cast<uintptr_t>(k.data_ptr()) |
                   reinterpret_cast<uintptr_t>(v.data_ptr()) | reinterpret_cast<uintptr_t>(beta.data_ptr()) |
                   reinterpret_cast<uintptr_t>(state.data_ptr());
  if (g) bits |= reinterpret_cast<uintptr_t>(g->data_ptr());
  if (read) bits |= reinterpret_cast<uintptr_t>(read->data_ptr());
  if (bits & 15) return false;
  const auto* impl = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  return impl->getDevice().index() == dev;
}

// The kernel's parameters as Triton lays them out: the non-constexpr arguments in order
// (q k v g beta S o r: 8 pointers; scale: fp32), then its global and profile scratch pointers.
constexpr size_t kParams = 11;
constexpr size_t kParamSizes[kParams] = {8, 8, 8, 8, 8, 8, 8, 8, 4, 8, 8};

// Registers the kernel Triton compiled for this call's signature. Returns "" when the plan
// was added, otherwise why not (the Python launcher then keeps this signature).
std::string add_plan(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const std::optional<at::Tensor>& g, const at::Tensor& beta,
                     const std::optional<at::Tensor>& read, uint64_t function, int64_t gx, int64_t gy,
                     int64_t threads, int64_t shared, double scale0) {
  auto key = key_of(q, k, v, g, beta, read);
  if (!key) return "not a CUDA call of the step's shapes";
  if (!load_driver()) return g_driver_error;
  if (g_plans.size() >= kMaxPlans) return "plan table full";
  void* f = reinterpret_cast<void*>(function);
  // the parameter layout must be exactly what step() passes; a driver that cannot say (older
  // than CUDA 12.4) gets no plans rather than a launch with arguments in the wrong places
  if (!g_param_info) return "the driver has no cuFuncGetParamInfo (CUDA < 12.4): the kernel's parameters cannot be checked";
  for (size_t i = 0; i < kParams; ++i) {
    size_t offset = 0, size = 0;
    if (g_param_info(f, i, &offset, &size) != 0 || size != kParamSizes[i])
      return "compiled kernel's parameters differ from the expected layout at index " + std::to_string(i);
  }
  size_t offset = 0, size = 0;
  if (g_param_info(f, kParams, &offset, &size) == 0)
    return "compiled kernel has more than " + std::to_string(kParams) + " parameters";
  if (const Plan* p = find(*key)) g_plans.erase(g_plans.begin() + (p - g_plans.data()));
  g_plans.push_back(Plan{*key, f, static_cast<unsigned>(gx), static_cast<unsigned>(gy),
                         static_cast<unsigned>(threads), static_cast<unsigned>(shared),
                         static_cast<float>(scale0)});
  return "";
}

// One token, as kernels.step.kda_step. Returns o, or None when no plan covers the call
// (first call of a signature, CPU tensors, a shape or alignment the plan was not made for):
// the caller then takes the Python path, which checks, raises or plans.
at::Tensor step(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& g,
                const at::Tensor& beta, const at::Tensor& state, const std::optional<at::Tensor>& read,
                std::optional<double> scale) {
  if (g_plans.empty()) return at::Tensor();
  auto key = key_of(q, k, v, g, beta, read);
  if (!key) return at::Tensor();
  const Plan* found = find(*key);
  if (!found || !eligible(q, k, v, g, beta, state, read, *key)) return at::Tensor();
  const Plan p = *found;                          // by value: nothing below may touch g_plans
  at::Tensor o = at::empty(v.sizes(), v.options());                           // (B, H, V)
  if (p.gx == 0 || p.gy == 0) return o;         // B*H = 0: nothing to launch (cuLaunchKernel refuses a 0 grid)
  void* ptrs[8] = {q.data_ptr(), k.data_ptr(), v.data_ptr(), g ? g->data_ptr() : q.data_ptr(),  // g: unread when absent
                   beta.data_ptr(), state.data_ptr(), o.data_ptr(),
                   read ? read->data_ptr() : o.data_ptr()};                      // r: unwritten when absent
  float s = scale ? static_cast<float>(*scale) : p.scale0;
  void* scratch[2] = {nullptr, nullptr};   // the kernel uses neither (checked by Python at plan time)
  void* params[kParams] = {&ptrs[0], &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4], &ptrs[5], &ptrs[6], &ptrs[7],
                           &s, &scratch[0], &scratch[1]};
  void* stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)
                     ->getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>((*key)[0])))
                     .native_handle();
  int err = g_launch(p.function, p.gx, p.gy, 1, p.threads, 1, 1, p.shared, stream, params, nullptr);
  if (err != 0) throw std::runtime_error("kda_step: cuLaunchKernel failed with CUresult " + std::to_string(err));
  return o;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "C++ host path of kernels.step.kda_step (checks, allocation, cuLaunchKernel)";
  m.def("step", &step, "one token; o, or None when no plan covers the call", py::arg("q"), py::arg("k"),
        py::arg("v"), py::arg("g"), py::arg("beta"), py::arg("state"), py::arg("read"), py::arg("scale"));
  m.def("add_plan", &add_plan, "register Triton's compiled kernel for this call's signature; '' or why not");
  m.def("clear", [] { g_plans.clear(); }, "forget every plan");
  m.def("plans", [] { return g_plans.size(); }, "how many plans are registered");
}
