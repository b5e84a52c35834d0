//! Reading what an ELF shared object needs from the system: its undefined dynamic symbols,
//! each with the symbol version it binds to, and its version requirements
//! (`.gnu.version_r`, one entry per needed library and version). The `object` crate does the
//! parsing; nothing here trusts an offset or a count of its own.

use object::elf;
use object::read::elf::{FileHeader, Sym};
use object::read::SymbolIndex;
use object::Endianness;

use super::{Binary, BinaryFormat, UndefinedSymbol, VersionNeed};

/// Read a 32- or 64-bit ELF file (`Elf` picks which). Errors are `object`'s messages, e.g.
/// `Invalid ELF section header offset`; the caller adds the file name.
pub(crate) fn read_elf<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
) -> Result<Binary, object::read::Error> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let arch = arch_name(header.e_machine(endian), header.is_class_64(), endian);
    let sections = header.sections(endian, data)?;
    let dynsym = sections.symbols(endian, data, elf::SHT_DYNSYM)?;
    let versions = sections.versions(endian, data)?;

    let mut undefined = Vec::new();
    for (index, sym) in dynsym.enumerate() {
        if index == SymbolIndex(0) || !sym.is_undefined(endian) {
            continue;
        }
        let name = String::from_utf8_lossy(sym.name(endian, dynsym.strings())?).into_owned();
        if name.is_empty() {
            continue;
        }
        let version = match &versions {
            Some(table) => table.version(table.version_index(endian, index).index())?,
            None => None,
        };
        undefined.push(UndefinedSymbol {
            name,
            version: version.map(|v| String::from_utf8_lossy(v.name()).into_owned()),
            version_file: version.and_then(|v| v.file()).map(|f| String::from_utf8_lossy(f).into_owned()),
        });
    }

    let mut version_needs = Vec::new();
    if let Some((mut needs, link)) = sections.gnu_verneed(endian, data)? {
        let strings = sections.strings(endian, data, link)?;
        while let Some((need, mut auxes)) = needs.next()? {
            let file = String::from_utf8_lossy(need.file(endian, strings)?).into_owned();
            while let Some(aux) = auxes.next()? {
                let version = String::from_utf8_lossy(aux.name(endian, strings)?).into_owned();
                version_needs.push(VersionNeed { file: file.clone(), version });
            }
        }
    }

    Ok(Binary { format: BinaryFormat::Elf { arch }, undefined, version_needs })
}

/// auditwheel's architecture names (the keys of the policy table) for an ELF machine.
/// Anything else gets a descriptive name that no policy covers.
fn arch_name(machine: elf::Machine, is_64: bool, endian: Endianness) -> String {
    let name = match machine {
        elf::EM_X86_64 => "x86_64",
        elf::EM_386 => "i686",
        elf::EM_AARCH64 => "aarch64",
        elf::EM_PPC64 if endian == Endianness::Little => "ppc64le",
        elf::EM_PPC64 => "ppc64",
        elf::EM_S390 if is_64 => "s390x",
        elf::EM_ARM => "armv7l",
        elf::EM_RISCV if is_64 => "riscv64",
        elf::EM_LOONGARCH if is_64 => "loongarch64",
        other => {
            return format!("ELF machine {} ({}-bit)", other.0, if is_64 { 64 } else { 32 });
        }
    };
    name.to_owned()
}
