//! Running from the static buffer assignment ([`axle_codegen_nvptx::arena`]) on the host
//! simulator: a straight-line module's run makes one temporary allocation, of exactly the
//! assignment's `temp_bytes`, and one buffer per output leaf (nothing else is allocated; the
//! constants are uploaded), every kernel runs at its offsets inside the temporary block (a
//! chain of element-wise kernels, a transpose, a reduction, a reshape the assignment makes a
//! view, a root leaf that is a parameter and so an output copy), the results equal the
//! reference evaluator's and a run leaves only its result. A module with host control flow
//! runs with a buffer per value instead (no assignment), with the same results.

use std::sync::{Arc, Mutex};

use axle_codegen_nvptx::device::{BufferKey, Device, DeviceMemory};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::{SimDevice, SimMem};
use axle_codegen_nvptx::{CodegenError, KernelInfo};
use axle_ir::types::ElementType;
use axle_ir::{compare_arrays, Literal, Module, Tolerance};
use axle_testkit::{leaves, real_array};

mod common;
use common::module;

/// The simulator, logging the size of every buffer it allocates (uploads are not logged).
struct Logging {
    sim: SimDevice,
    allocs: Arc<Mutex<Vec<usize>>>,
}

impl Device for Logging {
    type Mem = SimMem;
    type Program = <SimDevice as Device>::Program;

    fn name(&self) -> &str {
        self.sim.name()
    }
    fn description(&self) -> String {
        self.sim.description()
    }
    fn upload(&self, bytes: &[u8]) -> Result<SimMem, String> {
        self.sim.upload(bytes)
    }
    fn alloc(&self, bytes: usize) -> Result<SimMem, String> {
        self.allocs.lock().unwrap().push(bytes);
        self.sim.alloc(bytes)
    }
    fn download(&self, mem: &SimMem) -> Result<Vec<u8>, String> {
        self.sim.download(mem)
    }
    fn load(&self, m: &Module, kernels: &[KernelInfo]) -> Result<Self::Program, CodegenError> {
        self.sim.load(m, kernels)
    }
    fn launch(
        &self,
        program: &Self::Program,
        kernel: &KernelInfo,
        index: usize,
        args: &[(&SimMem, usize)],
    ) -> Result<(), String> {
        self.sim.launch(program, kernel, index, args)
    }
    fn copy(
        &self,
        src: &SimMem,
        src_off: usize,
        dst: &SimMem,
        dst_off: usize,
        bytes: usize,
    ) -> Result<(), String> {
        self.sim.copy(src, src_off, dst, dst_off, bytes)
    }
}

/// What one run made: the sizes allocated during it and the assignment's temporary bytes.
struct Allocs {
    during_run: Vec<usize>,
    temp_bytes: Option<u64>,
}

/// Compiles and runs `m` on `args` on the logging simulator, checks the result against the
/// evaluator and that only the result was left live; gives what the run allocated.
fn run_checked(m: &Module, args: &[Literal]) -> Allocs {
    let allocs = Arc::new(Mutex::new(Vec::new()));
    let mem = DeviceMemory::new(Logging {
        sim: SimDevice::default(),
        allocs: allocs.clone(),
    });
    let exe = Executable::compile(&mem, m.clone()).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<Vec<BufferKey>> = args
        .iter()
        .map(|a| leaves(a).iter().map(|l| mem.upload(&l.data)).collect())
        .collect::<Result<_, _>>()
        .unwrap();
    let before = mem.live();
    allocs.lock().unwrap().clear();
    let out = exe.run(&mem, &keys).unwrap_or_else(|e| panic!("{e}"));
    let during_run = allocs.lock().unwrap().clone();
    assert_eq!(
        mem.live() - before,
        out.len(),
        "the run left only its result"
    );
    let want = leaves(&axle_analysis::eval::evaluate(m, args).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(out.len(), want.len());
    for (k, (&key, w)) in out.iter().zip(&want).enumerate() {
        let got = axle_ir::ArrayLiteral {
            shape: w.shape.clone(),
            data: mem.download(key).unwrap(),
        };
        let tol = Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        };
        compare_arrays(&got, w, tol).unwrap_or_else(|e| panic!("leaf {k}: {e}"));
    }
    for k in out.into_iter().chain(keys.into_iter().flatten()) {
        mem.free(k).unwrap();
    }
    assert_eq!(mem.live(), 0);
    Allocs {
        during_run,
        temp_bytes: exe.assignment().map(|a| a.temp_bytes),
    }
}

fn f32s(dims: &[i64], f: impl Fn(usize) -> f64) -> Literal {
    real_array(ElementType::F32, dims, f)
}

#[test]
fn a_straight_line_run_makes_one_temporary_allocation_of_the_assignments_size() {
    let m = module(
        "HloModule chain\n\n\
         add {\n  p = f32[] parameter(0)\n  q = f32[] parameter(1)\n  ROOT s = f32[] add(p, q)\n}\n\n\
         ENTRY e {\n\
         a = f32[64,32] parameter(0)\n\
         b = f32[64,32] parameter(1)\n\
         c = f32[] constant(2)\n\
         cb = f32[64,32] broadcast(c), dimensions={}\n\
         x = f32[64,32] multiply(a, cb)\n\
         y = f32[64,32] add(x, b)\n\
         t = f32[32,64] transpose(y), dimensions={1,0}\n\
         v = f32[2048] reshape(t)\n\
         w = f32[2048] negate(v)\n\
         w2 = f32[64,32] reshape(w)\n\
         z = f32[64,32] exponential(w2)\n\
         zx = f32[64,32] add(z, x)\n\
         zero = f32[] constant(0)\n\
         s = f32[64] reduce(zx, zero), dimensions={1}, to_apply=add\n\
         ROOT o = (f32[64], f32[64,32]) tuple(s, a)\n}\n",
    );
    let args = [
        f32s(&[64, 32], |i| (i % 17) as f64 * 0.01),
        f32s(&[64, 32], |i| (i % 5) as f64 - 2.0),
    ];
    let got = run_checked(&m, &args);
    let temp = got
        .temp_bytes
        .expect("a straight-line module runs from its assignment");
    assert!(temp > 0, "the kernels' values live in the temporary block");
    // One temporary allocation, then one buffer per output leaf, nothing else.
    let outputs = [64 * 4, 64 * 32 * 4];
    let mut want = vec![temp as usize];
    want.extend(outputs);
    assert_eq!(got.during_run, want, "allocations of the run");
}

#[test]
fn a_module_with_host_control_flow_runs_with_a_buffer_per_value() {
    let m = module(
        "HloModule loop\n\n\
         cond {\n  s = (s32[], f32[16]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  \
         n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n\n\
         body {\n  s = (s32[], f32[16]) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n  \
         x = f32[16] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n  \
         j = s32[] add(i, one)\n  y = f32[16] add(x, x)\n  ROOT t = (s32[], f32[16]) tuple(j, y)\n}\n\n\
         ENTRY e {\n  a = f32[16] parameter(0)\n  z = s32[] constant(0)\n  \
         s = (s32[], f32[16]) tuple(z, a)\n  \
         w = (s32[], f32[16]) while(s), condition=cond, body=body\n  \
         ROOT r = f32[16] get-tuple-element(w), index=1\n}\n",
    );
    let got = run_checked(&m, &[f32s(&[16], |i| i as f64)]);
    assert_eq!(
        got.temp_bytes, None,
        "host control flow: no single arena yet"
    );
}
