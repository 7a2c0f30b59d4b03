//! Every HLO opcode in XLA's opcode list, with its text name.

use std::fmt;

macro_rules! opcodes {
    ($($variant:ident => $name:literal,)*) => {
        /// An HLO opcode.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
        }

        impl Opcode {
            /// Every opcode, in declaration order.
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            /// The opcode's name in HLO text.
            pub fn name(self) -> &'static str {
                match self { $(Opcode::$variant => $name,)* }
            }

            /// The opcode named `s` in HLO text.
            pub fn from_name(s: &str) -> Option<Opcode> {
                match s {
                    $($name => Some(Opcode::$variant),)*
                    // XLA prints optimization-barrier as `opt-barrier`; accept the long name too.
                    "optimization-barrier" => Some(Opcode::OptBarrier),
                    _ => None,
                }
            }
        }
    };
}

opcodes! {
    Abs => "abs",
    Add => "add",
    AddDependency => "add-dependency",
    AfterAll => "after-all",
    AllGather => "all-gather",
    AllGatherDone => "all-gather-done",
    AllGatherStart => "all-gather-start",
    AllReduce => "all-reduce",
    AllReduceDone => "all-reduce-done",
    AllReduceStart => "all-reduce-start",
    AllToAll => "all-to-all",
    And => "and",
    AsyncDone => "async-done",
    AsyncStart => "async-start",
    AsyncUpdate => "async-update",
    Atan2 => "atan2",
    BatchNormGrad => "batch-norm-grad",
    BatchNormInference => "batch-norm-inference",
    BatchNormTraining => "batch-norm-training",
    Bitcast => "bitcast",
    BitcastConvert => "bitcast-convert",
    Broadcast => "broadcast",
    Call => "call",
    Cbrt => "cbrt",
    Ceil => "ceil",
    Cholesky => "cholesky",
    Clamp => "clamp",
    Clz => "count-leading-zeros",
    CollectiveBroadcast => "collective-broadcast",
    CollectivePermute => "collective-permute",
    CollectivePermuteDone => "collective-permute-done",
    CollectivePermuteStart => "collective-permute-start",
    Compare => "compare",
    Complex => "complex",
    Concatenate => "concatenate",
    Conditional => "conditional",
    Constant => "constant",
    Convert => "convert",
    Convolution => "convolution",
    Copy => "copy",
    CopyDone => "copy-done",
    CopyStart => "copy-start",
    Cos => "cosine",
    CustomCall => "custom-call",
    Divide => "divide",
    Domain => "domain",
    Dot => "dot",
    DynamicReshape => "dynamic-reshape",
    DynamicSlice => "dynamic-slice",
    DynamicUpdateSlice => "dynamic-update-slice",
    Erf => "erf",
    Exp => "exponential",
    Expm1 => "exponential-minus-one",
    Fft => "fft",
    Floor => "floor",
    Fusion => "fusion",
    Gather => "gather",
    GetDimensionSize => "get-dimension-size",
    GetTupleElement => "get-tuple-element",
    Imag => "imag",
    Infeed => "infeed",
    Iota => "iota",
    IsFinite => "is-finite",
    Log => "log",
    Log1p => "log-plus-one",
    Logistic => "logistic",
    Map => "map",
    Maximum => "maximum",
    Minimum => "minimum",
    MulHi => "mulhi",
    Multiply => "multiply",
    Negate => "negate",
    Not => "not",
    OptBarrier => "opt-barrier",
    Or => "or",
    Outfeed => "outfeed",
    Pad => "pad",
    Parameter => "parameter",
    PartitionId => "partition-id",
    Popcnt => "popcnt",
    Power => "power",
    RaggedAllToAll => "ragged-all-to-all",
    RaggedDot => "ragged-dot",
    Real => "real",
    Recv => "recv",
    RecvDone => "recv-done",
    Reduce => "reduce",
    ReducePrecision => "reduce-precision",
    ReduceScatter => "reduce-scatter",
    ReduceWindow => "reduce-window",
    Remainder => "remainder",
    ReplicaId => "replica-id",
    Reshape => "reshape",
    Reverse => "reverse",
    Rng => "rng",
    RngBitGenerator => "rng-bit-generator",
    RngGetAndUpdateState => "rng-get-and-update-state",
    RoundNearestAfz => "round-nearest-afz",
    RoundNearestEven => "round-nearest-even",
    Rsqrt => "rsqrt",
    Scatter => "scatter",
    Select => "select",
    SelectAndScatter => "select-and-scatter",
    Send => "send",
    SendDone => "send-done",
    SetDimensionSize => "set-dimension-size",
    ShiftLeft => "shift-left",
    ShiftRightArithmetic => "shift-right-arithmetic",
    ShiftRightLogical => "shift-right-logical",
    Sign => "sign",
    Sin => "sine",
    Slice => "slice",
    Sort => "sort",
    Sqrt => "sqrt",
    StochasticConvert => "stochastic-convert",
    Subtract => "subtract",
    Tan => "tan",
    Tanh => "tanh",
    TopK => "topk",
    Transpose => "transpose",
    TriangularSolve => "triangular-solve",
    Tuple => "tuple",
    While => "while",
    Xor => "xor",
}

impl Opcode {
    /// Elementwise ops of one operand.
    pub fn is_elementwise_unary(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Abs | Cbrt
                | Ceil
                | Clz
                | Cos
                | Erf
                | Exp
                | Expm1
                | Floor
                | Imag
                | IsFinite
                | Log
                | Log1p
                | Logistic
                | Negate
                | Not
                | Popcnt
                | Real
                | RoundNearestAfz
                | RoundNearestEven
                | Rsqrt
                | Sign
                | Sin
                | Sqrt
                | Tan
                | Tanh
                | Convert
                | BitcastConvert
                | ReducePrecision
                | Copy
        )
    }

    /// Elementwise ops of two operands (compare included).
    pub fn is_elementwise_binary(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Add | Atan2
                | And
                | Complex
                | Compare
                | Divide
                | Maximum
                | Minimum
                | MulHi
                | Multiply
                | Or
                | Power
                | Remainder
                | ShiftLeft
                | ShiftRightArithmetic
                | ShiftRightLogical
                | Subtract
                | Xor
                | StochasticConvert
        )
    }

    /// Whether the op is elementwise (unary, binary, `select` or `clamp`).
    pub fn is_elementwise(self) -> bool {
        self.is_elementwise_unary()
            || self.is_elementwise_binary()
            || matches!(self, Opcode::Select | Opcode::Clamp)
    }

    /// Whether two operands can be swapped without changing the result.
    pub fn is_commutative(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Add | Multiply | MulHi | Maximum | Minimum | And | Or | Xor
        )
    }

    /// Whether the op has effects beyond its result, so it must not be removed or merged.
    pub fn has_side_effect(self) -> bool {
        use Opcode::*;
        matches!(
            self,
            Infeed
                | Outfeed
                | Send
                | SendDone
                | Recv
                | RecvDone
                | Rng
                | RngGetAndUpdateState
                | AllReduce
                | AllReduceStart
                | AllReduceDone
                | AllGather
                | AllGatherStart
                | AllGatherDone
                | AllToAll
                | RaggedAllToAll
                | CollectiveBroadcast
                | CollectivePermute
                | CollectivePermuteStart
                | CollectivePermuteDone
                | ReduceScatter
                | AfterAll
                | AddDependency
                | Domain
                | AsyncStart
                | AsyncUpdate
                | AsyncDone
        )
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Custom-call targets that annotate a value's sharding (`jax.lax.with_sharding_constraint`,
/// JAX's lowering, Shardy's export, the SPMD partitioner's shape markers, the barriers that
/// stop sharding propagation): a custom-call of one of these whose result has its operand's
/// shape is the identity.
pub const SHARDING_ANNOTATIONS: &[&str] = &[
    "Sharding",
    "xla.sdy.FuncResultSharding",
    "xla.sdy.GlobalToLocalShape",
    "xla.sdy.LocalToGlobalShape",
    "SPMDFullToShardShape",
    "SPMDShardToFullShape",
    "ShardBarrierFrom",
    "ShardBarrierTo",
];

/// Custom-call targets that say where or how a value is kept, not what it is: host offloading
/// (`MoveToHost`, `MoveToDevice`, JAX's `annotate_device_placement`) and XLA's
/// `LayoutConstraint`. Like a sharding annotation, one whose result has its operand's shape is
/// the identity (XLA CPU keeps every value in host memory).
pub const PLACEMENT_ANNOTATIONS: &[&str] = &[
    "MoveToHost",
    "MoveToDevice",
    "annotate_device_placement",
    "LayoutConstraint",
];

/// Whether `target` is a sharding or a placement annotation ([`SHARDING_ANNOTATIONS`],
/// [`PLACEMENT_ANNOTATIONS`]): a custom-call of it whose result has its operand's shape is the
/// identity.
pub fn is_annotation_target(target: &str) -> bool {
    SHARDING_ANNOTATIONS.contains(&target) || PLACEMENT_ANNOTATIONS.contains(&target)
}
