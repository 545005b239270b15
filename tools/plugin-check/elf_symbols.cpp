#include "elf_symbols.hpp"

#include <elf.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace plugboard::check {
namespace {

/// Copies a T out of data at offset, after a bounds check.
template <typename T>
T readAt(const std::string& data, uint64_t offset, const std::string& path) {
  if (offset > data.size() || data.size() - offset < sizeof(T))
    throw std::runtime_error(path + ": truncated ELF file (offset " + std::to_string(offset) + ")");
  T value;
  std::memcpy(&value, data.data() + offset, sizeof(T));
  return value;
}

/// The whole file as bytes.
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Checks the ELF identification bytes this reader understands.
void checkIdent(const std::string& data, const std::string& path) {
  if (data.size() < EI_NIDENT || std::memcmp(data.data(), ELFMAG, SELFMAG) != 0)
    throw std::runtime_error(path + " is not an ELF file");
  if (data[EI_CLASS] != ELFCLASS64 || data[EI_DATA] != ELFDATA2LSB)
    throw std::runtime_error(path + " is not a 64-bit little-endian ELF file (this check reads only those)");
}

}  // namespace

std::vector<std::string> definedDynamicSymbols(const std::string& path) {
  const std::string data = slurp(path);
  checkIdent(data, path);
  const auto eh = readAt<Elf64_Ehdr>(data, 0, path);
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = readAt<Elf64_Shdr>(data, eh.e_shoff + uint64_t(i) * eh.e_shentsize, path);
    if (sh.sh_type != SHT_DYNSYM) continue;
    const auto strtab = readAt<Elf64_Shdr>(data, eh.e_shoff + uint64_t(sh.sh_link) * eh.e_shentsize, path);
    std::vector<std::string> names;
    for (uint64_t off = 0; sh.sh_entsize && off + sh.sh_entsize <= sh.sh_size; off += sh.sh_entsize) {
      const auto sym = readAt<Elf64_Sym>(data, sh.sh_offset + off, path);
      const unsigned bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE)) continue;
      if (sym.st_name >= strtab.sh_size) throw std::runtime_error(path + ": symbol name outside .dynstr");
      const char* name = data.data() + strtab.sh_offset + sym.st_name;
      names.emplace_back(name, strnlen(name, strtab.sh_size - sym.st_name));
    }
    return names;
  }
  throw std::runtime_error(path + " has no dynamic symbol table (.dynsym)");
}

bool isLinkerProvidedSymbol(const std::string& name) {
  return name == "_init" || name == "_fini" || name == "_edata" || name == "_end" || name == "__bss_start";
}

}  // namespace plugboard::check
