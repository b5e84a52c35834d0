//! Reading the undefined symbols of a Mach-O shared object (macOS variants, e.g. Metal): the
//! manylinux policy does not apply to them, but the CPython abi3 table and the torch
//! stable-ABI rule do. Mach-O prefixes C names with `_`; it is removed here so that names
//! compare with the tables as on ELF.

use object::{Object, ObjectSymbol};

use super::{Binary, BinaryFormat, UndefinedSymbol};

/// Read a (thin, 32- or 64-bit) Mach-O file. Errors are `object`'s messages.
pub(crate) fn read_macho(data: &[u8]) -> Result<Binary, object::read::Error> {
    let file = object::File::parse(data)?;
    let arch = format!("{:?}", file.architecture()).to_lowercase();
    let mut undefined = Vec::new();
    for sym in file.symbols() {
        if !sym.is_undefined() {
            continue;
        }
        let raw = String::from_utf8_lossy(sym.name_bytes()?);
        let name = raw.strip_prefix('_').unwrap_or(&raw);
        if name.is_empty() {
            continue;
        }
        undefined.push(UndefinedSymbol { name: name.to_owned(), version: None, version_file: None });
    }
    Ok(Binary { format: BinaryFormat::MachO { arch }, undefined, version_needs: Vec::new() })
}
