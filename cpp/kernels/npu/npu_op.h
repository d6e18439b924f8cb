#pragma once
// Calls a torch_npu op through the PyTorch dispatcher by its schema name ("npu::<name>"), with the
// arguments given by name as in Python. torch_npu registers these schemas when it is imported;
// nothing here links against it. Arguments left out take the schema's defaults, and a name the
// schema does not declare is an error, so a call cannot silently drift from the op's signature.
#include <ATen/core/ivalue.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace mtpserve::kernels::npu {

using NamedArg = std::pair<const char*, c10::IValue>;

// The op's outputs, in schema order. Throws std::runtime_error naming the op when it is not
// registered (torch_npu not imported) or an argument is unknown or missing.
std::vector<c10::IValue> call_npu_op(const std::string& name, std::initializer_list<NamedArg> args);

}  // namespace mtpserve::kernels::npu
