// Reads the dynamic symbol table of a shared library straight from its ELF
// file (no binutils needed), as the dynamic linker would see it.
#pragma once

#include <string>
#include <vector>

namespace plugboard::check {

/// Names of the global and weak symbols that path's .dynsym defines (not
/// undefined imports). Throws std::runtime_error for a file that is not a
/// 64-bit little-endian ELF or has no dynamic symbol table.
std::vector<std::string> definedDynamicSymbols(const std::string& path);

/// Symbols the static linker adds to every shared library; not the
/// plugin's doing, so they are allowed next to the entry symbol.
bool isLinkerProvidedSymbol(const std::string& name);

}  // namespace plugboard::check
