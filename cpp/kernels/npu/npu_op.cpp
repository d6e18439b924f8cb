#include "kernels/npu/npu_op.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <stdexcept>

namespace mtpserve::kernels::npu {

namespace {

c10::OperatorHandle find_op(const std::string& name) {
  auto handle = c10::Dispatcher::singleton().findSchema({"npu::" + name, ""});
  if (!handle) {
    throw std::runtime_error("npu::" + name + " is not registered: the NPU kernels call torch_npu's ops, so "
                             "torch_npu (with CANN >= 8.1.RC1) must be imported first");
  }
  return *handle;
}

}  // namespace

std::vector<c10::IValue> call_npu_op(const std::string& name, std::initializer_list<NamedArg> args) {
  const auto op = find_op(name);
  const auto& schema = op.schema();
  std::vector<bool> used(args.size(), false);
  torch::jit::Stack stack;
  for (const auto& param : schema.arguments()) {
    size_t i = 0;
    for (const auto& arg : args) {
      if (param.name() == arg.first) break;
      ++i;
    }
    if (i < args.size()) {
      stack.push_back((args.begin() + i)->second);
      used[i] = true;
    } else if (param.default_value()) {
      stack.push_back(*param.default_value());
    } else {
      throw std::runtime_error("npu::" + name + ": argument '" + param.name() + "' is required");
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!used[i]) {
      throw std::runtime_error("npu::" + name + " has no argument '" + (args.begin() + i)->first + "'");
    }
  }
  op.callBoxed(stack);
  return std::vector<c10::IValue>(stack.begin(), stack.end());
}

}  // namespace mtpserve::kernels::npu
