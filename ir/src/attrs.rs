//! Instruction attributes: the `key=value` items after an instruction's operands.
//!
//! Attributes live in one flat pool of `(AttrKey, AttrValue)` entries owned by the module; each
//! instruction has a dense `(start, len)` range into it, so instructions without attributes cost
//! nothing beyond the range. Keys XLA defines get typed values; any other key keeps its value text
//! verbatim ([`AttrKey::Other`] with [`AttrValue::Raw`]) so that printing loses nothing.

use crate::collective::{ReplicaGroups, SourceTargetPair};
use crate::types::{ComparisonDirection, ComparisonType, FusionKind};
use crate::{CompId, InstId};

macro_rules! attr_keys {
    ($($variant:ident => $name:literal : $kind:ident,)*) => {
        /// A known attribute key; the declaration order is the canonical print order.
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum AttrKey {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
            /// Any other key, with its value kept verbatim. Printed after the known keys above
            /// `control-predecessors`, in the order they were given.
            Other(Box<str>),
            /// `control-predecessors={...}`
            ControlPredecessors,
            /// `sharding={...}`, verbatim.
            Sharding,
            /// `frontend_attributes={...}`, verbatim.
            FrontendAttributes,
            /// `metadata={...}`, verbatim.
            Metadata,
            /// `backend_config=...`, verbatim (a quoted string or a JSON object).
            BackendConfig,
        }

        impl AttrKey {
            /// The key as written in HLO text.
            pub fn name(&self) -> &str {
                match self {
                    $(AttrKey::$variant => $name,)*
                    AttrKey::Other(s) => s,
                    AttrKey::ControlPredecessors => "control-predecessors",
                    AttrKey::Sharding => "sharding",
                    AttrKey::FrontendAttributes => "frontend_attributes",
                    AttrKey::Metadata => "metadata",
                    AttrKey::BackendConfig => "backend_config",
                }
            }

            /// The key for `s` (an [`AttrKey::Other`] if XLA's grammar has no typed key by that name).
            pub fn from_name(s: &str) -> AttrKey {
                match s {
                    $($name => AttrKey::$variant,)*
                    "control-predecessors" => AttrKey::ControlPredecessors,
                    "sharding" => AttrKey::Sharding,
                    "frontend_attributes" => AttrKey::FrontendAttributes,
                    "metadata" => AttrKey::Metadata,
                    "backend_config" => AttrKey::BackendConfig,
                    other => AttrKey::Other(other.into()),
                }
            }

            /// The kind of value this key takes.
            pub fn kind(&self) -> AttrKind {
                match self {
                    $(AttrKey::$variant => AttrKind::$kind,)*
                    AttrKey::ControlPredecessors => AttrKind::Insts,
                    _ => AttrKind::Raw,
                }
            }
        }
    };
}

/// The kind of value an attribute key takes in HLO text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// An integer.
    Int,
    /// `{1,2,3}`.
    Ints,
    /// `true` / `false`.
    Bool,
    /// A bare word such as `rng_uniform` or `NO_TRANSPOSE`.
    Ident,
    /// A quoted string.
    Str,
    /// `{[0:4], [1:5:2]}`.
    Slice,
    /// `0_0x1_2_1`: `low_high` or `low_high_interior` per dimension.
    Padding,
    /// `{size=3x3 stride=...}`.
    Window,
    /// `b01f_01io->b01f`.
    DimLabels,
    /// `EQ`, `LT`, ...
    Direction,
    /// `FLOAT`, `TOTALORDER`, ...
    CmpType,
    /// `kLoop`, ...
    FusionKind,
    /// One computation name.
    Comp,
    /// `{a, b}` computation names.
    Comps,
    /// `{a, b}` instruction names.
    Insts,
    /// `replica_groups`: `{{0,1},{2,3}}`, `{}` or `[2,4]<=[4,2]T(1,0)`.
    ReplicaGroups,
    /// `{{0,1},{1,2}}`: source-target pairs.
    Pairs,
    /// Anything else, verbatim.
    Raw,
}

attr_keys! {
    ChannelId => "channel_id": Int,
    ReplicaGroups => "replica_groups": ReplicaGroups,
    SourceTargetPairs => "source_target_pairs": Pairs,
    ConstrainLayout => "constrain_layout": Bool,
    ParameterNumber => "parameter_number": Int,
    Index => "index": Int,
    Dimensions => "dimensions": Ints,
    Slice => "slice": Slice,
    DynamicSliceSizes => "dynamic_slice_sizes": Ints,
    Padding => "padding": Padding,
    Window => "window": Window,
    DimLabels => "dim_labels": DimLabels,
    FeatureGroupCount => "feature_group_count": Int,
    BatchGroupCount => "batch_group_count": Int,
    LhsBatchDims => "lhs_batch_dims": Ints,
    LhsContractingDims => "lhs_contracting_dims": Ints,
    RhsBatchDims => "rhs_batch_dims": Ints,
    RhsContractingDims => "rhs_contracting_dims": Ints,
    OffsetDims => "offset_dims": Ints,
    CollapsedSliceDims => "collapsed_slice_dims": Ints,
    StartIndexMap => "start_index_map": Ints,
    OperandBatchingDims => "operand_batching_dims": Ints,
    StartIndicesBatchingDims => "start_indices_batching_dims": Ints,
    UpdateWindowDims => "update_window_dims": Ints,
    InsertedWindowDims => "inserted_window_dims": Ints,
    ScatterDimsToOperandDims => "scatter_dims_to_operand_dims": Ints,
    InputBatchingDims => "input_batching_dims": Ints,
    ScatterIndicesBatchingDims => "scatter_indices_batching_dims": Ints,
    IndexVectorDim => "index_vector_dim": Int,
    SliceSizes => "slice_sizes": Ints,
    IndicesAreSorted => "indices_are_sorted": Bool,
    UniqueIndices => "unique_indices": Bool,
    UseGlobalDeviceIds => "use_global_device_ids": Bool,
    IotaDimension => "iota_dimension": Int,
    Direction => "direction": Direction,
    Type => "type": CmpType,
    K => "k": Int,
    Largest => "largest": Bool,
    IsStable => "is_stable": Bool,
    ExponentBits => "exponent_bits": Int,
    MantissaBits => "mantissa_bits": Int,
    Distribution => "distribution": Ident,
    Algorithm => "algorithm": Ident,
    FftType => "fft_type": Ident,
    FftLength => "fft_length": Ints,
    LeftSide => "left_side": Bool,
    Lower => "lower": Bool,
    UnitDiagonal => "unit_diagonal": Bool,
    TransposeA => "transpose_a": Ident,
    Kind => "kind": FusionKind,
    CustomCallTarget => "custom_call_target": Str,
    ToApply => "to_apply": Comp,
    Calls => "calls": Comp,
    Condition => "condition": Comp,
    Body => "body": Comp,
    Select => "select": Comp,
    Scatter => "scatter": Comp,
    BranchComputations => "branch_computations": Comps,
    TrueComputation => "true_computation": Comp,
    FalseComputation => "false_computation": Comp,
    CalledComputations => "called_computations": Comps,
}

/// One dimension of a window (`reduce-window`, `select-and-scatter`, `convolution`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    /// Window size.
    pub size: i64,
    /// Stride.
    pub stride: i64,
    /// Padding before.
    pub pad_lo: i64,
    /// Padding after.
    pub pad_hi: i64,
    /// Base (lhs) dilation.
    pub lhs_dilate: i64,
    /// Window (rhs) dilation.
    pub rhs_dilate: i64,
    /// Whether the window is reversed.
    pub reversal: bool,
}

impl Default for WindowDim {
    fn default() -> Self {
        WindowDim {
            size: 1,
            stride: 1,
            pad_lo: 0,
            pad_hi: 0,
            lhs_dilate: 1,
            rhs_dilate: 1,
            reversal: false,
        }
    }
}

/// Convolution dimension numbers, `dim_labels=b01f_01io->b01f` in text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ConvDims {
    /// Batch dimension of the input.
    pub input_batch: i64,
    /// Feature dimension of the input.
    pub input_feature: i64,
    /// Spatial dimensions of the input, in spatial order.
    pub input_spatial: Box<[i64]>,
    /// Input-feature dimension of the kernel.
    pub kernel_input_feature: i64,
    /// Output-feature dimension of the kernel.
    pub kernel_output_feature: i64,
    /// Spatial dimensions of the kernel.
    pub kernel_spatial: Box<[i64]>,
    /// Batch dimension of the output.
    pub output_batch: i64,
    /// Feature dimension of the output.
    pub output_feature: i64,
    /// Spatial dimensions of the output.
    pub output_spatial: Box<[i64]>,
}

/// A typed attribute value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// An integer.
    Int(i64),
    /// A list of integers.
    Ints(Box<[i64]>),
    /// A boolean.
    Bool(bool),
    /// A bare identifier.
    Ident(Box<str>),
    /// A string, unescaped.
    Str(Box<str>),
    /// Slice bounds: `(start, limit, stride)` per dimension.
    Slice(Box<[[i64; 3]]>),
    /// Padding: `(low, high, interior)` per dimension.
    Padding(Box<[[i64; 3]]>),
    /// A window.
    Window(Box<[WindowDim]>),
    /// Convolution dimension numbers.
    DimLabels(Box<ConvDims>),
    /// A comparison direction.
    Direction(ComparisonDirection),
    /// A comparison type.
    CmpType(ComparisonType),
    /// A fusion kind.
    FusionKind(FusionKind),
    /// A computation.
    Comp(CompId),
    /// Several computations.
    Comps(Box<[CompId]>),
    /// Several instructions (control predecessors).
    Insts(Box<[InstId]>),
    /// Replica groups.
    ReplicaGroups(Box<ReplicaGroups>),
    /// Source-target pairs.
    Pairs(Box<[SourceTargetPair]>),
    /// Verbatim text.
    Raw(Box<str>),
}

/// A typed view of one attribute entry.
pub type Attr = (AttrKey, AttrValue);
