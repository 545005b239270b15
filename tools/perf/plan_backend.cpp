// GpuBackend over plugboard::GpuPlanExecutor (--mem gpu --plan FILE): the
// collective runs through an execution plan instead of GpuCollectives.
#include "gpu_backend.hpp"
#include "plugboard/error.hpp"
#include "plugboard/gpu/plan_executor.hpp"
#include "runner.hpp"

namespace plugboard::perf {
namespace {

class PlanBackend : public GpuBackend {
 public:
  PlanBackend(Communicator& comm, Plan plan, size_t maxInputBytes) : exec_(comm, std::move(plan), maxInputBytes) {}
  std::string name() const override { return "plugboard"; }
  void checkErrors() override { exec_.checkErrors(); }
  void fitShape(Collective c, Shape& s) const override { fitShapeToPlan(s, c, exec_.plan().inputChunks); }

  void run(const Call& c, const CallPointers& p, cudaStream_t s) override {
    exec_.run(p.send, p.result, c.shape.sendElements, c.type, c.op, s);
  }

  const GpuPlanExecutor& executor() const { return exec_; }

 private:
  GpuPlanExecutor exec_;
};

}  // namespace

std::unique_ptr<GpuBackend> makePlanBackend(Communicator& comm, const std::string& path, Collective c,
                                            size_t maxInputBytes, std::string* describe) {
  Plan plan = loadPlan(path);
  if (plan.collective != collectiveName(c))
    throw Error(ErrorCode::InvalidUsage, "--plan " + path + " computes " + plan.collective + ", not " + collectiveName(c) + " (-C)");
  auto backend = std::make_unique<PlanBackend>(comm, std::move(plan), maxInputBytes);
  *describe = "through plan " + path + " (" + backend->executor().plan().name + ", " +
              std::to_string(backend->executor().slices()) + " slices per thread block)";
  return backend;
}

}  // namespace plugboard::perf
