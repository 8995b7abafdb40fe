// Human-readable bytecode, for `minivm --disassemble` and for tests.
#ifndef MINIVM_VM_BYTECODE_DISASSEMBLER_H_
#define MINIVM_VM_BYTECODE_DISASSEMBLER_H_

#include <string>

#include "vm/bytecode/program.h"

namespace minivm {

// Every function, each instruction on one line with its offset, source line,
// mnemonic and decoded operands (names for symbols, globals, functions,
// classes and string constants).
std::string Disassemble(const Program& program);
std::string DisassembleFunction(const Program& program, const Function& fn);

}  // namespace minivm

#endif  // MINIVM_VM_BYTECODE_DISASSEMBLER_H_
