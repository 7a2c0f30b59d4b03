//! Loading relocatable object files into this process with LLVM's ORC JIT (LLJIT and its
//! object linking layer), so code compiled once (by this process or, through the compilation
//! cache, by an earlier one) runs without LLVM's optimizer or code generator.
//!
//! Invariants: the JIT resolves the objects' undefined symbols against the given absolute
//! symbols (the runtime library's host calls) first and then the process (the C library's
//! math functions, `memcpy`, ...); an object that leaves a symbol unresolved, or that is not a
//! valid object for the host, is an error value, never a crash. The machine code lives until
//! the [`LoadedObject`] is dropped. The caller initializes the host's LLVM target before
//! loading. Both backends' JITs use it: the cpu backend's programs and the `nvptx-sim`
//! simulator's retargeted kernels.

use std::ffi::{CStr, CString};

use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::{
    LLVMOrcCreateLLJIT, LLVMOrcDisposeLLJIT, LLVMOrcLLJITAddObjectFile,
    LLVMOrcLLJITGetGlobalPrefix, LLVMOrcLLJITGetMainJITDylib, LLVMOrcLLJITLookup,
    LLVMOrcLLJITMangleAndIntern, LLVMOrcLLJITRef,
};
use llvm_sys::orc2::{
    LLVMJITEvaluatedSymbol, LLVMJITSymbolFlags, LLVMJITSymbolGenericFlags, LLVMOrcAbsoluteSymbols,
    LLVMOrcCSymbolMapPair, LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess,
    LLVMOrcJITDylibAddGenerator, LLVMOrcJITDylibDefine,
};

/// Object files linked into this process (one JIT, one symbol namespace).
pub struct LoadedObject {
    jit: LLVMOrcLLJITRef,
}

// SAFETY: after loading, the JIT is only used by `Drop`; the machine code it owns is immutable
// and may be called from any thread.
unsafe impl Send for LoadedObject {}
unsafe impl Sync for LoadedObject {}

impl Drop for LoadedObject {
    fn drop(&mut self) {
        // SAFETY: `jit` was created by `LLVMOrcCreateLLJIT` and is disposed of once; the error
        // it may return is consumed.
        unsafe {
            let e = LLVMOrcDisposeLLJIT(self.jit);
            let _ = take_error(e);
        }
    }
}

/// The message of an LLVM error (consuming it), or `None` for success.
unsafe fn take_error(e: LLVMErrorRef) -> Option<String> {
    if e.is_null() {
        return None;
    }
    // SAFETY: `e` is a live error; its message is copied and then freed.
    unsafe {
        let m = LLVMGetErrorMessage(e);
        let s = CStr::from_ptr(m).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(m);
        Some(s)
    }
}

impl LoadedObject {
    /// Links `objects` into the process (their external symbols resolve against each other),
    /// with `symbols` (name, address) defined for them, and returns them with the address of
    /// the function `entry`.
    pub fn load(
        objects: &[Vec<u8>],
        symbols: &[(&str, usize)],
        entry: &str,
    ) -> Result<(LoadedObject, usize), String> {
        let entry = CString::new(entry).map_err(|e| e.to_string())?;
        let mut jit: LLVMOrcLLJITRef = std::ptr::null_mut();
        // SAFETY: a null builder asks for the default LLJIT for the host; on success `jit` is
        // owned by the returned `LoadedObject`, which disposes of it.
        if let Some(e) = unsafe { take_error(LLVMOrcCreateLLJIT(&mut jit, std::ptr::null_mut())) } {
            return Err(format!("cannot create the JIT: {e}"));
        }
        let loaded = LoadedObject { jit };
        // SAFETY: every call below takes the live `jit` and objects it hands out; ownership of
        // the generator, the materialization unit and the memory buffer passes to the JIT, and
        // every returned error is consumed.
        unsafe {
            let dylib = LLVMOrcLLJITGetMainJITDylib(jit);
            let mut pairs: Vec<LLVMOrcCSymbolMapPair> = Vec::with_capacity(symbols.len());
            for (name, addr) in symbols {
                let c = CString::new(*name).map_err(|e| e.to_string())?;
                pairs.push(LLVMOrcCSymbolMapPair {
                    Name: LLVMOrcLLJITMangleAndIntern(jit, c.as_ptr()),
                    Sym: LLVMJITEvaluatedSymbol {
                        Address: *addr as u64,
                        Flags: LLVMJITSymbolFlags {
                            GenericFlags:
                                LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported as u8
                                    | LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsCallable
                                        as u8,
                            TargetFlags: 0,
                        },
                    },
                });
            }
            if !pairs.is_empty() {
                let mu = LLVMOrcAbsoluteSymbols(pairs.as_mut_ptr(), pairs.len());
                if let Some(e) = take_error(LLVMOrcJITDylibDefine(dylib, mu)) {
                    return Err(format!("cannot define the runtime symbols: {e}"));
                }
            }
            let mut gen = std::ptr::null_mut();
            let e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut gen,
                LLVMOrcLLJITGetGlobalPrefix(jit),
                None,
                std::ptr::null_mut(),
            );
            if let Some(e) = take_error(e) {
                return Err(format!("cannot search the process for symbols: {e}"));
            }
            LLVMOrcJITDylibAddGenerator(dylib, gen);
            let name = c"axle-object";
            for object in objects {
                let buf = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
                    object.as_ptr().cast(),
                    object.len(),
                    name.as_ptr(),
                );
                if let Some(e) = take_error(LLVMOrcLLJITAddObjectFile(jit, dylib, buf)) {
                    return Err(format!("cannot add an object file: {e}"));
                }
            }
            let mut addr = 0u64;
            if let Some(e) = take_error(LLVMOrcLLJITLookup(jit, &mut addr, entry.as_ptr())) {
                return Err(format!("cannot link the object files: {e}"));
            }
            if addr == 0 {
                return Err(format!(
                    "the object files have no {}",
                    entry.to_string_lossy()
                ));
            }
            Ok((loaded, addr as usize))
        }
    }

    /// The address of the function or global `name` of the loaded objects.
    pub fn lookup(&self, name: &str) -> Result<usize, String> {
        let c = CString::new(name).map_err(|e| e.to_string())?;
        let mut addr = 0u64;
        // SAFETY: `jit` is live; the returned error is consumed.
        if let Some(e) = unsafe { take_error(LLVMOrcLLJITLookup(self.jit, &mut addr, c.as_ptr())) }
        {
            return Err(format!("cannot find {name}: {e}"));
        }
        if addr == 0 {
            return Err(format!("the object files have no {name}"));
        }
        Ok(addr as usize)
    }
}
