//! The module: instructions and computations as dense columns indexed by typed `u32` ids.
//!
//! Every instruction property most instructions have is a dense column (opcode, shape, layout,
//! parent computation, operand range, attribute range, name span); rare payloads (constant
//! literals) are `hashbrown` maps keyed by id. Instructions are created through one
//! [`Module::push_inst`] that grows every column together, deleted by tombstone, and replaced
//! through a [`Rewriter`] whose forwarding entries are resolved in one sweep when it finishes.
//! [`Module::compact`] renumbers live entities in creation order and bumps the epoch.
//!
//! A computation's parameter table (indexed by parameter number) only holds numbers below the
//! module's instruction count: a `parameter` whose number is not (yet) below it waits aside and
//! is entered once enough instructions exist, so a hostile `parameter(2147483647)` allocates
//! nothing (and the verifier reports it out of range).

use bitvec::vec::BitVec;
use hashbrown::{HashMap, HashTable};
use std::hash::{BuildHasher, Hash};

use crate::attrs::{Attr, AttrKey, AttrValue};
use crate::entity::{dense_map, SecondaryMap};
pub use crate::ids::{BufferId, CompId, InstId, LayoutId, ShapeId};
use crate::literal::Literal;
use crate::opcode::Opcode;
use crate::schedule::Schedule;
use crate::types::{ArrayShape, ComparisonType, ElementType, Layout, Shape};

/// An append-only interner: equal values get equal ids.
#[derive(Clone, Debug)]
pub struct Interner<T> {
    items: Vec<T>,
    table: HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Interner {
            items: Vec::new(),
            table: HashTable::new(),
            hasher: Default::default(),
        }
    }
}

impl<T: Hash + Eq + Clone> Interner<T> {
    /// The id of `value`, adding it if new.
    pub fn intern(&mut self, value: T) -> u32 {
        let hash = self.hasher.hash_one(&value);
        let items = &self.items;
        if let Some(&i) = self.table.find(hash, |&i| items[i as usize] == value) {
            return i;
        }
        let i = self.items.len() as u32;
        self.items.push(value);
        let (items, hasher) = (&self.items, &self.hasher);
        self.table
            .insert_unique(hash, i, |&j| hasher.hash_one(&items[j as usize]));
        i
    }

    /// The value with id `i`.
    pub fn get(&self, i: u32) -> &T {
        &self.items[i as usize]
    }

    /// The number of distinct values.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether nothing was interned.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A `(start, len)` range into one of the module's pools.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Range32 {
    /// First index.
    pub start: u32,
    /// Number of entries.
    pub len: u32,
}

impl Range32 {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// The value of a `constant` instruction.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstValue {
    /// A literal.
    Literal(Literal),
    /// The literal was elided in the text (`constant({...})`): the shape is known, the data is not.
    Elided,
}

/// `entry_computation_layout`: the parameters' and the result's shapes with layouts.
pub type EntryLayout = (Vec<(ShapeId, LayoutId)>, (ShapeId, LayoutId));

/// A 1-based source position (line, column) of an entity parsed from text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrcLoc {
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based.
    pub col: u32,
}

/// A computation's data.
#[derive(Clone, Debug)]
pub struct CompData {
    /// The computation's name.
    pub name: Box<str>,
    /// Parameter instructions, indexed by parameter number (`InstId::NONE` where missing).
    pub params: Vec<InstId>,
    /// The root instruction.
    pub root: InstId,
}

/// One debug table (`FileNames`, `FunctionNames`, `FileLocations`, `StackFrames`), kept verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugTable {
    /// The table's title line.
    pub title: Box<str>,
    /// The table's entry lines, trimmed.
    pub lines: Vec<Box<str>>,
}

/// Everything needed to create an instruction.
#[derive(Clone, Debug)]
pub struct NewInst {
    /// The opcode.
    pub opcode: Opcode,
    /// The result shape.
    pub shape: ShapeId,
    /// The result layout.
    pub layout: LayoutId,
    /// The operands, in order.
    pub operands: Vec<InstId>,
    /// Attributes, in any order (they are stored sorted by key).
    pub attrs: Vec<Attr>,
    /// The name, if any.
    pub name: Option<String>,
}

/// The live instructions of each computation, keyed by computation
/// ([`Module::insts_by_comp`]).
pub type InstsByComp = SecondaryMap<CompId, Vec<InstId>>;

/// An HLO module.
#[derive(Clone, Debug)]
pub struct Module {
    /// The module name (`HloModule NAME`).
    pub name: String,
    /// Header attributes other than `entry_computation_layout`, verbatim and in order.
    pub header_attrs: Vec<(String, String)>,
    /// `entry_computation_layout={(params)->result}`: shapes with layouts.
    pub entry_layout: Option<EntryLayout>,
    /// Debug tables, in order, kept verbatim.
    pub debug_tables: Vec<DebugTable>,

    opcode: Vec<Opcode>,
    shape: Vec<ShapeId>,
    layout: Vec<LayoutId>,
    parent: Vec<CompId>,
    operands: Vec<Range32>,
    operand_pool: Vec<InstId>,
    attrs: Vec<Range32>,
    attr_pool: Vec<Attr>,
    names: Vec<Range32>,
    name_pool: String,
    dead: BitVec,
    constants: HashMap<InstId, ConstValue>,
    src_locs: Vec<SrcLoc>,
    comp_src_locs: HashMap<CompId, SrcLoc>,

    comps: Vec<CompData>,
    comp_dead: BitVec,
    entry: CompId,
    /// Parameters whose number is not yet below the instruction count (see `place_param`),
    /// and the smallest such number (`usize::MAX` when none wait).
    unplaced_params: Vec<InstId>,
    unplaced_min: usize,

    shapes: Interner<Shape>,
    layouts: Interner<Layout>,
    epoch: u64,

    schedule: Option<Schedule>,
    schedule_epoch: u64,
}

impl Default for Module {
    fn default() -> Self {
        Module::new("module")
    }
}

impl Module {
    fn header_count(&self, key: &str) -> u32 {
        self.header_attrs
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.parse::<u32>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or(1)
    }

    fn set_header_count(&mut self, key: &str, n: u32) {
        match self.header_attrs.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = n.to_string(),
            None => self.header_attrs.push((key.to_string(), n.to_string())),
        }
    }

    /// `replica_count=` of the header (1 when absent; the parser refuses a value that is not
    /// a positive `u32`).
    pub fn replica_count(&self) -> u32 {
        self.header_count("replica_count")
    }

    /// `num_partitions=` of the header (1 when absent; the parser refuses a value that is not
    /// a positive `u32`).
    pub fn num_partitions(&self) -> u32 {
        self.header_count("num_partitions")
    }

    /// Sets `replica_count=` (kept with the other header attributes, in their order).
    pub fn set_replica_count(&mut self, n: u32) {
        self.set_header_count("replica_count", n)
    }

    /// Sets `num_partitions=` (kept with the other header attributes, in their order).
    pub fn set_num_partitions(&mut self, n: u32) {
        self.set_header_count("num_partitions", n)
    }

    /// An empty module.
    pub fn new(name: &str) -> Module {
        let mut m = Module {
            name: name.to_string(),
            header_attrs: Vec::new(),
            entry_layout: None,
            debug_tables: Vec::new(),
            opcode: Vec::new(),
            shape: Vec::new(),
            layout: Vec::new(),
            parent: Vec::new(),
            operands: Vec::new(),
            operand_pool: Vec::new(),
            attrs: Vec::new(),
            attr_pool: Vec::new(),
            names: Vec::new(),
            name_pool: String::new(),
            dead: BitVec::new(),
            constants: HashMap::new(),
            src_locs: Vec::new(),
            comp_src_locs: HashMap::new(),
            comps: Vec::new(),
            comp_dead: BitVec::new(),
            entry: CompId::NONE,
            unplaced_params: Vec::new(),
            unplaced_min: usize::MAX,
            shapes: Interner::default(),
            layouts: Interner::default(),
            epoch: 0,
            schedule: None,
            schedule_epoch: 0,
        };
        // LayoutId(0) is always "no layout".
        m.layouts.intern(Layout::None);
        m
    }

    // ---- shapes and layouts ----

    /// Interns a shape.
    pub fn intern_shape(&mut self, s: Shape) -> ShapeId {
        ShapeId(self.shapes.intern(s))
    }

    /// Interns a layout.
    pub fn intern_layout(&mut self, l: Layout) -> LayoutId {
        LayoutId(self.layouts.intern(l))
    }

    /// The "no layout" layout id.
    pub fn no_layout(&self) -> LayoutId {
        LayoutId(0)
    }

    /// The shape with id `s`.
    pub fn shape_of(&self, s: ShapeId) -> &Shape {
        self.shapes.get(s.0)
    }

    /// The layout with id `l`.
    pub fn layout_of(&self, l: LayoutId) -> &Layout {
        self.layouts.get(l.0)
    }

    /// The number of distinct shapes interned.
    pub fn num_shapes(&self) -> usize {
        self.shapes.len()
    }

    /// The number of distinct layouts interned.
    pub fn num_layouts(&self) -> usize {
        self.layouts.len()
    }

    // ---- instructions ----

    /// Creates an instruction in computation `comp`. Every column grows together.
    pub fn push_inst(&mut self, comp: CompId, inst: NewInst) -> InstId {
        let mut attrs = inst.attrs;
        let name = inst.name.as_deref().unwrap_or("");
        self.push_inst_parts(
            comp,
            inst.opcode,
            inst.shape,
            inst.layout,
            &inst.operands,
            &mut attrs,
            name,
        )
    }

    /// Creates an instruction from borrowed parts (the attributes are drained from `attrs`, so a
    /// caller can reuse the buffer). This is [`Module::push_inst`] without the allocations.
    #[allow(clippy::too_many_arguments)]
    pub fn push_inst_parts(
        &mut self,
        comp: CompId,
        opcode: Opcode,
        shape: ShapeId,
        layout: LayoutId,
        operands: &[InstId],
        attrs: &mut Vec<Attr>,
        name: &str,
    ) -> InstId {
        let id = InstId::new(self.opcode.len());
        self.opcode.push(opcode);
        self.shape.push(shape);
        self.layout.push(layout);
        self.parent.push(comp);
        let start = self.operand_pool.len() as u32;
        self.operand_pool.extend_from_slice(operands);
        self.operands.push(Range32 {
            start,
            len: operands.len() as u32,
        });
        if attrs.len() > 1 {
            attrs.sort_by(|a, b| a.0.cmp(&b.0));
        }
        let start = self.attr_pool.len() as u32;
        let len = attrs.len() as u32;
        self.attr_pool.append(attrs);
        self.attrs.push(Range32 { start, len });
        let start = self.name_pool.len() as u32;
        self.name_pool.push_str(name);
        self.names.push(Range32 {
            start,
            len: name.len() as u32,
        });
        self.src_locs.push(SrcLoc { line: 0, col: 0 });
        self.dead.push(false);
        if opcode == Opcode::Parameter {
            self.place_param(id);
        }
        if self.unplaced_min < self.opcode.len() {
            let waiting = std::mem::take(&mut self.unplaced_params);
            self.unplaced_min = usize::MAX;
            for p in waiting {
                self.place_param(p);
            }
        }
        id
    }

    /// Enters parameter `id` in its computation's table, or, while its number is not below the
    /// number of instructions in the module (so no valid module could have that many
    /// parameters yet), keeps it waiting: the table never grows beyond the module's size, so
    /// `parameter(2147483647)` allocates nothing (the verifier reports it out of range).
    fn place_param(&mut self, id: InstId) {
        let Some(n) = self.int_attr(id, &AttrKey::ParameterNumber) else {
            return;
        };
        let n = n.max(0) as u64;
        if n >= self.opcode.len() as u64 {
            self.unplaced_params.push(id);
            self.unplaced_min = self.unplaced_min.min(n as usize);
            return;
        }
        let n = n as usize;
        let params = &mut self.comps[self.parent[id.index()].index()].params;
        if params.len() <= n {
            params.resize(n + 1, InstId::NONE);
        }
        if params[n].is_none() {
            params[n] = id;
        }
    }

    /// Sets operand `k` of `id` in place.
    pub fn set_operand(&mut self, id: InstId, k: usize, new: InstId) {
        let r = self.operands[id.index()];
        self.operand_pool[r.start as usize + k] = new;
    }

    /// Reserves room for `n` more instructions with about `operands` operands and `name_bytes` bytes
    /// of names in total, so a parser of known input size (or a pass that knows how much it
    /// adds) grows no column while it runs.
    pub fn reserve(&mut self, n: usize, operands: usize, name_bytes: usize) {
        self.opcode.reserve(n);
        self.shape.reserve(n);
        self.layout.reserve(n);
        self.parent.reserve(n);
        self.operands.reserve(n);
        self.attrs.reserve(n);
        self.names.reserve(n);
        self.src_locs.reserve(n);
        self.dead.reserve(n);
        self.attr_pool.reserve(n);
        self.operand_pool.reserve(operands);
        self.name_pool.reserve(name_bytes);
    }

    /// The number of instruction ids ever created (live or dead): the length of every column.
    pub fn inst_capacity(&self) -> usize {
        self.opcode.len()
    }

    /// The number of live instructions.
    pub fn num_live_insts(&self) -> usize {
        self.opcode.len() - self.dead.count_ones()
    }

    /// Whether `id` is a live instruction.
    pub fn is_live(&self, id: InstId) -> bool {
        id.index() < self.opcode.len() && !self.dead[id.index()]
    }

    /// Live instruction ids in creation order.
    pub fn live_ids(&self) -> Vec<InstId> {
        let mut out = Vec::with_capacity(self.num_live_insts());
        out.extend(self.live_indices().map(InstId::new));
        out
    }

    /// Indices of live instructions in creation order: a word-at-a-time scan of the tombstone
    /// column (bitvec's bit-at-a-time `iter_zeros` is several times slower on large modules).
    fn live_indices(&self) -> impl Iterator<Item = usize> + '_ {
        zero_bits(&self.dead)
    }

    /// The opcode of `id`.
    #[inline]
    pub fn opcode(&self, id: InstId) -> Opcode {
        self.opcode[id.index()]
    }

    /// The shape id of `id`.
    #[inline]
    pub fn shape_id(&self, id: InstId) -> ShapeId {
        self.shape[id.index()]
    }

    /// The shape of `id`.
    #[inline]
    pub fn shape(&self, id: InstId) -> &Shape {
        self.shape_of(self.shape[id.index()])
    }

    /// The array shape of `id`, if it is an array.
    pub fn array_shape(&self, id: InstId) -> Option<&ArrayShape> {
        self.shape(id).as_array()
    }

    /// The layout id of `id`.
    #[inline]
    pub fn layout_id(&self, id: InstId) -> LayoutId {
        self.layout[id.index()]
    }

    /// The computation `id` belongs to.
    #[inline]
    pub fn parent(&self, id: InstId) -> CompId {
        self.parent[id.index()]
    }

    /// The operands of `id`.
    #[inline]
    pub fn operands(&self, id: InstId) -> &[InstId] {
        &self.operand_pool[self.operands[id.index()].range()]
    }

    /// The attributes of `id`, sorted by key.
    #[inline]
    pub fn attrs(&self, id: InstId) -> &[Attr] {
        &self.attr_pool[self.attrs[id.index()].range()]
    }

    /// The value of attribute `key` on `id`.
    pub fn attr(&self, id: InstId, key: &AttrKey) -> Option<&AttrValue> {
        self.attrs(id)
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// An integer attribute.
    pub fn int_attr(&self, id: InstId, key: &AttrKey) -> Option<i64> {
        match self.attr(id, key) {
            Some(AttrValue::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// An integer-list attribute.
    pub fn ints_attr(&self, id: InstId, key: &AttrKey) -> Option<&[i64]> {
        match self.attr(id, key) {
            Some(AttrValue::Ints(v)) => Some(v),
            _ => None,
        }
    }

    /// The comparison type of `compare` instruction `id` on operands of element type
    /// `operand_ty`: its `type` attribute, else XLA's default for that type.
    pub fn comparison_type(&self, id: InstId, operand_ty: ElementType) -> ComparisonType {
        match self.attr(id, &AttrKey::Type) {
            Some(AttrValue::CmpType(t)) => *t,
            _ => ComparisonType::default_for(operand_ty),
        }
    }

    /// A boolean attribute.
    pub fn bool_attr(&self, id: InstId, key: &AttrKey) -> Option<bool> {
        match self.attr(id, key) {
            Some(AttrValue::Bool(v)) => Some(*v),
            _ => None,
        }
    }

    /// A single-computation attribute (`to_apply`, `calls`, `condition`, `body`, ...).
    pub fn comp_attr(&self, id: InstId, key: &AttrKey) -> Option<CompId> {
        match self.attr(id, key) {
            Some(AttrValue::Comp(c)) => Some(*c),
            _ => None,
        }
    }

    /// Every computation `id` calls, in attribute order.
    pub fn called_comps(&self, id: InstId) -> Vec<CompId> {
        self.called_comps_iter(id).collect()
    }

    /// Every computation `id` calls, in attribute order, without allocating.
    pub fn called_comps_iter(&self, id: InstId) -> impl Iterator<Item = CompId> + '_ {
        self.attrs(id)
            .iter()
            .flat_map(|(_, v)| match v {
                AttrValue::Comp(c) => std::slice::from_ref(c),
                AttrValue::Comps(cs) => &cs[..],
                _ => &[],
            })
            .copied()
    }

    /// The branch computations of a `conditional`: `branch_computations={...}`, or the
    /// predicate form's `true_computation` and `false_computation` (in that order, branch 0
    /// running when the predicate is true). `None` when neither form is complete.
    pub fn branch_computations(&self, id: InstId) -> Option<Vec<CompId>> {
        if let Some(AttrValue::Comps(cs)) = self.attr(id, &AttrKey::BranchComputations) {
            return Some(cs.to_vec());
        }
        match (
            self.attr(id, &AttrKey::TrueComputation),
            self.attr(id, &AttrKey::FalseComputation),
        ) {
            (Some(AttrValue::Comp(t)), Some(AttrValue::Comp(f))) => Some(vec![*t, *f]),
            _ => None,
        }
    }

    /// Control predecessors of `id`.
    pub fn control_predecessors(&self, id: InstId) -> &[InstId] {
        match self.attr(id, &AttrKey::ControlPredecessors) {
            Some(AttrValue::Insts(v)) => v,
            _ => &[],
        }
    }

    /// The parameter number of a `parameter` instruction.
    pub fn parameter_number(&self, id: InstId) -> Option<i64> {
        self.int_attr(id, &AttrKey::ParameterNumber)
    }

    /// The name of `id` (empty if it has none).
    pub fn name(&self, id: InstId) -> &str {
        &self.name_pool[self.names[id.index()].range()]
    }

    /// Sets the name of `id`.
    pub fn set_name(&mut self, id: InstId, name: &str) {
        let start = self.name_pool.len() as u32;
        self.name_pool.push_str(name);
        self.names[id.index()] = Range32 {
            start,
            len: name.len() as u32,
        };
    }

    /// The value of a `constant`.
    pub fn constant(&self, id: InstId) -> Option<&ConstValue> {
        self.constants.get(&id)
    }

    /// The literal of a `constant`, if it was not elided.
    pub fn literal(&self, id: InstId) -> Option<&Literal> {
        match self.constants.get(&id) {
            Some(ConstValue::Literal(l)) => Some(l),
            _ => None,
        }
    }

    /// Sets the value of a `constant`.
    pub fn set_constant(&mut self, id: InstId, value: ConstValue) {
        self.constants.insert(id, value);
    }

    /// Where `id` was defined in the parsed text, if it came from text.
    pub fn src_loc(&self, id: InstId) -> Option<SrcLoc> {
        self.src_locs
            .get(id.index())
            .copied()
            .filter(|l| l.line != 0)
    }

    /// Records where `id` was defined in the parsed text.
    pub fn set_src_loc(&mut self, id: InstId, loc: SrcLoc) {
        self.src_locs[id.index()] = loc;
    }

    /// Where computation `c` was defined in the parsed text.
    pub fn comp_src_loc(&self, c: CompId) -> Option<SrcLoc> {
        self.comp_src_locs.get(&c).copied()
    }

    /// Records where computation `c` was defined in the parsed text.
    pub fn set_comp_src_loc(&mut self, c: CompId, loc: SrcLoc) {
        self.comp_src_locs.insert(c, loc);
    }

    /// Replaces the attributes of `id`.
    pub fn set_attrs(&mut self, id: InstId, mut attrs: Vec<Attr>) {
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        let r = &mut self.attrs[id.index()];
        if attrs.len() as u32 == r.len {
            let range = r.range();
            for (slot, a) in self.attr_pool[range].iter_mut().zip(attrs) {
                *slot = a;
            }
        } else {
            let start = self.attr_pool.len() as u32;
            *r = Range32 {
                start,
                len: attrs.len() as u32,
            };
            self.attr_pool.extend(attrs);
        }
    }

    /// Replaces the operands of `id` (in place when the count is unchanged).
    pub fn set_operands(&mut self, id: InstId, ops: &[InstId]) {
        let r = &mut self.operands[id.index()];
        if ops.len() as u32 == r.len {
            self.operand_pool[r.range()].copy_from_slice(ops);
        } else {
            let start = self.operand_pool.len() as u32;
            *r = Range32 {
                start,
                len: ops.len() as u32,
            };
            self.operand_pool.extend_from_slice(ops);
        }
    }

    /// Moves `id` into computation `comp` (outlining: a fusion pass moves the members of a
    /// fusion into its fused computation; their operands must be made valid there too). A
    /// `parameter` cannot move (computations index their parameters).
    pub fn set_parent(&mut self, id: InstId, comp: CompId) {
        debug_assert!(self.opcode[id.index()] != Opcode::Parameter);
        self.parent[id.index()] = comp;
    }

    /// Sets the result shape and layout of `id`.
    pub fn set_shape(&mut self, id: InstId, shape: ShapeId, layout: LayoutId) {
        self.shape[id.index()] = shape;
        self.layout[id.index()] = layout;
    }

    /// Tombstones `id`. Its users must be gone or forwarded before the module is used again.
    pub fn remove_inst(&mut self, id: InstId) {
        self.dead.set(id.index(), true);
        self.constants.remove(&id);
    }

    // ---- computations ----

    /// Creates an empty computation.
    pub fn add_computation(&mut self, name: &str) -> CompId {
        let id = CompId::new(self.comps.len());
        self.comps.push(CompData {
            name: name.into(),
            params: Vec::new(),
            root: InstId::NONE,
        });
        self.comp_dead.push(false);
        id
    }

    /// The number of computation ids ever created.
    pub fn comp_capacity(&self) -> usize {
        self.comps.len()
    }

    /// Live computations in creation order.
    pub fn computations(&self) -> Vec<CompId> {
        self.comp_dead.iter_zeros().map(CompId::new).collect()
    }

    /// Whether `c` is a live computation.
    pub fn is_live_comp(&self, c: CompId) -> bool {
        c.index() < self.comps.len() && !self.comp_dead[c.index()]
    }

    /// Removes a computation and every instruction in it.
    pub fn remove_computation(&mut self, c: CompId) {
        self.comp_dead.set(c.index(), true);
        for i in 0..self.parent.len() {
            if self.parent[i] == c && !self.dead[i] {
                self.remove_inst(InstId::new(i));
            }
        }
    }

    /// Removes the computations `cs` and every instruction in them, in one sweep over the parent
    /// column (so removing many computations stays linear).
    pub fn remove_computations(&mut self, cs: &[CompId]) {
        if cs.is_empty() {
            return;
        }
        let mut gone = BitVec::<usize>::repeat(false, self.comps.len());
        for &c in cs {
            self.comp_dead.set(c.index(), true);
            gone.set(c.index(), true);
        }
        for i in 0..self.parent.len() {
            let p = self.parent[i];
            if !p.is_none() && gone[p.index()] && !self.dead[i] {
                self.remove_inst(InstId::new(i));
            }
        }
    }

    /// The data of computation `c`.
    pub fn comp(&self, c: CompId) -> &CompData {
        &self.comps[c.index()]
    }

    /// The name of computation `c`.
    pub fn comp_name(&self, c: CompId) -> &str {
        &self.comps[c.index()].name
    }

    /// Renames computation `c`.
    pub fn set_comp_name(&mut self, c: CompId, name: &str) {
        self.comps[c.index()].name = name.into();
    }

    /// The root of computation `c`.
    pub fn root(&self, c: CompId) -> InstId {
        self.comps[c.index()].root
    }

    /// Sets the root of computation `c`.
    pub fn set_root(&mut self, c: CompId, root: InstId) {
        self.comps[c.index()].root = root;
    }

    /// The parameters of computation `c`, by parameter number.
    pub fn params(&self, c: CompId) -> &[InstId] {
        &self.comps[c.index()].params
    }

    /// The entry computation (`CompId::NONE` if not set).
    pub fn entry(&self) -> CompId {
        self.entry
    }

    /// Sets the entry computation.
    pub fn set_entry(&mut self, c: CompId) {
        self.entry = c;
    }

    /// Live instructions of every computation, in creation order: `result[c]` (an entry for
    /// every computation id of the module, empty for a dead one).
    pub fn insts_by_comp(&self) -> InstsByComp {
        // Sized first, so that thousands of small fused computations cost one allocation each
        // instead of a chain of reallocations.
        let mut counts: SecondaryMap<CompId, usize> = dense_map(self.comps.len(), 0);
        for i in self.live_indices() {
            let p = self.parent[i];
            if !p.is_none() {
                counts[p] += 1;
            }
        }
        let mut out: InstsByComp = dense_map(self.comps.len(), Vec::new());
        for (c, n) in counts.iter() {
            out[c] = Vec::with_capacity(*n);
        }
        for i in self.live_indices() {
            let p = self.parent[i];
            if !p.is_none() {
                out[p].push(InstId::new(i));
            }
        }
        out
    }

    /// The instructions computation `c`'s root depends on through operands, the root first
    /// (depth-first, each once): the work is proportional to them, where [`Module::comp_insts`]
    /// sweeps the whole module, so this is the one to call per fusion of a large module.
    pub fn root_reach(&self, c: CompId) -> Vec<InstId> {
        let root = self.root(c);
        let mut seen = hashbrown::HashSet::new();
        seen.insert(root);
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            out.push(i);
            for &o in self.operands(i) {
                if seen.insert(o) {
                    stack.push(o);
                }
            }
        }
        out
    }

    /// Live instructions of computation `c`, in creation order (a sweep over the parent column).
    pub fn comp_insts(&self, c: CompId) -> Vec<InstId> {
        self.live_indices()
            .filter(|&i| self.parent[i] == c)
            .map(InstId::new)
            .collect()
    }

    // ---- epochs, rewriting and compaction ----

    /// The epoch: bumped by every change made through a [`Rewriter`] and by compaction, so
    /// analyses cached under an older epoch are stale.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Marks the module as changed (invalidates cached analyses and makes the schedule stale).
    pub fn bump_epoch(&mut self) {
        self.epoch += 1;
    }

    // ---- the schedule side table ----

    /// The module's schedule, if it has one that is up to date (set or repaired at the current
    /// epoch; see [`crate::schedule`]).
    pub fn schedule(&self) -> Option<&Schedule> {
        self.schedule
            .as_ref()
            .filter(|_| self.schedule_epoch == self.epoch)
    }

    /// Whether the module has a schedule that later changes made stale.
    pub fn has_stale_schedule(&self) -> bool {
        self.schedule.is_some() && self.schedule_epoch != self.epoch
    }

    /// Sets the schedule. This is a change of the module: it bumps the epoch (analyses that
    /// depend on the order go) and the schedule is current at the new epoch.
    pub fn set_schedule(&mut self, s: Schedule) {
        self.epoch += 1;
        self.schedule = Some(s);
        self.schedule_epoch = self.epoch;
    }

    /// Removes the schedule (bumping the epoch if there was one).
    pub fn clear_schedule(&mut self) {
        if self.schedule.take().is_some() {
            self.epoch += 1;
        }
    }

    /// Repairs a stale schedule against the module as it is now ([`Schedule::updated`]) and
    /// makes it current; returns whether there was one to repair. The epoch is not bumped: the
    /// change that made the schedule stale already did.
    pub fn update_schedule(&mut self) -> bool {
        if !self.has_stale_schedule() {
            return false;
        }
        let s = self.schedule.as_ref().map(|s| s.updated(self));
        self.schedule = s;
        self.schedule_epoch = self.epoch;
        true
    }

    /// A rewriter that batches edits and resolves replace-all-uses in one sweep.
    pub fn rewriter(&mut self) -> Rewriter<'_> {
        Rewriter {
            m: self,
            forward: HashMap::new(),
            changed: false,
        }
    }

    /// Bytes held by the dense instruction columns and pools, names and constants excluded.
    pub fn ir_bytes(&self) -> usize {
        use std::mem::size_of;
        self.opcode.capacity() * size_of::<Opcode>()
            + self.shape.capacity() * size_of::<ShapeId>()
            + self.layout.capacity() * size_of::<LayoutId>()
            + self.parent.capacity() * size_of::<CompId>()
            + self.operands.capacity() * size_of::<Range32>()
            + self.operand_pool.capacity() * size_of::<InstId>()
            + self.attrs.capacity() * size_of::<Range32>()
            + self.attr_pool.capacity() * size_of::<Attr>()
            + self
                .attr_pool
                .iter()
                .map(|(_, v)| attr_heap_bytes(v))
                .sum::<usize>()
            + self.dead.capacity() / 8
    }

    /// Bytes held by instruction names and source locations.
    pub fn name_bytes(&self) -> usize {
        self.names.capacity() * std::mem::size_of::<Range32>()
            + self.name_pool.capacity()
            + self.src_locs.capacity() * std::mem::size_of::<SrcLoc>()
    }

    /// Renumbers live instructions and computations densely, keeping creation order, drops dead
    /// ones and garbage in the pools, and bumps the epoch. Returns the old-to-new maps.
    pub fn compact(&mut self) -> Remap {
        let mut comp_map = vec![CompId::NONE; self.comps.len()];
        let mut comps = Vec::new();
        for c in self.comp_dead.iter_zeros() {
            comp_map[c] = CompId::new(comps.len());
            comps.push(self.comps[c].clone());
        }
        let mut inst_map = vec![InstId::NONE; self.opcode.len()];
        let mut n = 0;
        for i in self.live_indices() {
            inst_map[i] = InstId::new(n);
            n += 1;
        }
        let map_inst = |i: InstId| if i.is_none() { i } else { inst_map[i.index()] };
        let map_comp = |c: CompId| if c.is_none() { c } else { comp_map[c.index()] };
        let mut out = Module::new(&self.name);
        out.header_attrs = std::mem::take(&mut self.header_attrs);
        out.entry_layout = self.entry_layout.take();
        out.debug_tables = std::mem::take(&mut self.debug_tables);
        out.shapes = std::mem::take(&mut self.shapes);
        out.layouts = std::mem::take(&mut self.layouts);
        out.comps = comps
            .into_iter()
            .map(|mut c| {
                c.root = map_inst(c.root);
                c.params = c.params.iter().map(|&p| map_inst(p)).collect();
                c
            })
            .collect();
        out.comp_dead = BitVec::repeat(false, out.comps.len());
        out.entry = map_comp(self.entry);
        out.unplaced_params = self
            .unplaced_params
            .iter()
            .map(|&p| map_inst(p))
            .filter(|p| !p.is_none())
            .collect();
        out.unplaced_min = self.unplaced_min;
        for (c, l) in &self.comp_src_locs {
            let n = map_comp(*c);
            if !n.is_none() {
                out.comp_src_locs.insert(n, *l);
            }
        }
        // Every column is rebuilt with exact capacities, moving attribute values out of the old
        // pool (only computation and instruction references need remapping) and touching the
        // constant table only for constants.
        let attr_total: usize = zero_bits(&self.dead)
            .map(|i| self.attrs[i].len as usize)
            .sum();
        let op_total: usize = zero_bits(&self.dead)
            .map(|i| self.operands[i].len as usize)
            .sum();
        out.opcode.reserve_exact(n);
        out.shape.reserve_exact(n);
        out.layout.reserve_exact(n);
        out.parent.reserve_exact(n);
        out.operands.reserve_exact(n);
        out.attrs.reserve_exact(n);
        out.names.reserve_exact(n);
        out.src_locs.reserve_exact(n);
        out.dead.reserve(n);
        out.operand_pool.reserve_exact(op_total);
        out.attr_pool.reserve_exact(attr_total);
        out.name_pool.reserve(self.name_pool.len());
        let mut old_attrs = std::mem::take(&mut self.attr_pool);
        for i in zero_bits(&self.dead) {
            let id = InstId::new(i);
            let r = self.operands[i];
            let start = out.operand_pool.len() as u32;
            out.operand_pool
                .extend(self.operand_pool[r.range()].iter().map(|&o| map_inst(o)));
            out.operands.push(Range32 { start, len: r.len });
            let ar = self.attrs[i];
            let start = out.attr_pool.len() as u32;
            for slot in old_attrs[ar.range()].iter_mut() {
                let v = match &slot.1 {
                    AttrValue::Comp(_) | AttrValue::Comps(_) | AttrValue::Insts(_) => {
                        remap_value(&slot.1, &map_inst, &map_comp)
                    }
                    _ => std::mem::replace(&mut slot.1, AttrValue::Int(0)),
                };
                out.attr_pool.push((slot.0.clone(), v));
            }
            out.attrs.push(Range32 { start, len: ar.len });
            let new = InstId::new(out.opcode.len());
            out.opcode.push(self.opcode[i]);
            out.shape.push(self.shape[i]);
            out.layout.push(self.layout[i]);
            out.parent.push(map_comp(self.parent[i]));
            let name = &self.name_pool[self.names[i].range()];
            let start = out.name_pool.len() as u32;
            out.names.push(Range32 {
                start,
                len: name.len() as u32,
            });
            out.name_pool.push_str(name);
            out.dead.push(false);
            if self.opcode[i] == Opcode::Constant {
                if let Some(c) = self.constants.remove(&id) {
                    out.constants.insert(new, c);
                }
            }
            out.src_locs.push(self.src_locs[i]);
        }
        out.epoch = self.epoch + 1;
        // The schedule follows the renumbering; a current one stays current.
        if let Some(sched) = &self.schedule {
            out.schedule = Some(sched.remap(&inst_map, &comp_map, out.comps.len()));
            out.schedule_epoch = if self.schedule_epoch == self.epoch {
                out.epoch
            } else {
                self.schedule_epoch
            };
        }
        *self = out;
        Remap {
            insts: inst_map,
            comps: comp_map,
        }
    }
}

/// Indices of the zero bits of `bits`, in order, scanning a word at a time.
fn zero_bits(bits: &BitVec) -> impl Iterator<Item = usize> + '_ {
    let n = bits.len();
    bits.as_raw_slice()
        .iter()
        .enumerate()
        .flat_map(move |(w, &word)| {
            let mut z = !word;
            std::iter::from_fn(move || {
                if z == 0 {
                    return None;
                }
                let b = z.trailing_zeros() as usize;
                z &= z - 1;
                Some(w * usize::BITS as usize + b)
            })
        })
        .take_while(move |&i| i < n)
}

fn attr_heap_bytes(v: &AttrValue) -> usize {
    use std::mem::size_of;
    match v {
        AttrValue::Ints(x) => x.len() * 8,
        AttrValue::Ident(s) | AttrValue::Str(s) | AttrValue::Raw(s) => s.len(),
        AttrValue::Slice(x) | AttrValue::Padding(x) => x.len() * 24,
        AttrValue::Window(w) => w.len() * size_of::<crate::attrs::WindowDim>(),
        AttrValue::DimLabels(_) => size_of::<crate::attrs::ConvDims>() + 64,
        AttrValue::Comps(c) => c.len() * 4,
        AttrValue::Insts(c) => c.len() * 4,
        AttrValue::Pairs(p) => p.len() * 16,
        AttrValue::ReplicaGroups(g) => match &**g {
            crate::collective::ReplicaGroups::List(l) => l.iter().map(|g| 16 + g.len() * 8).sum(),
            crate::collective::ReplicaGroups::Iota(i) => 64 + i.reshape_dims.len() * 16,
        },
        _ => 0,
    }
}

fn remap_value(
    v: &AttrValue,
    map_inst: &impl Fn(InstId) -> InstId,
    map_comp: &impl Fn(CompId) -> CompId,
) -> AttrValue {
    match v {
        AttrValue::Comp(c) => AttrValue::Comp(map_comp(*c)),
        AttrValue::Comps(cs) => AttrValue::Comps(cs.iter().map(|&c| map_comp(c)).collect()),
        AttrValue::Insts(is) => AttrValue::Insts(
            is.iter()
                .map(|&i| map_inst(i))
                .filter(|i| !i.is_none())
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Old-to-new id maps produced by [`Module::compact`] (`NONE` for removed entities).
#[derive(Clone, Debug)]
pub struct Remap {
    /// Instruction map, indexed by old id.
    pub insts: Vec<InstId>,
    /// Computation map, indexed by old id.
    pub comps: Vec<CompId>,
}

/// Batches edits to a module. Replace-all-uses records a forwarding entry; [`Rewriter::finish`]
/// resolves every entry in one sweep over the operand pool, the roots and control predecessors.
pub struct Rewriter<'m> {
    m: &'m mut Module,
    forward: HashMap<InstId, InstId>,
    changed: bool,
}

impl<'m> Rewriter<'m> {
    /// The module as it stands (forwarding not yet applied).
    pub fn module(&self) -> &Module {
        self.m
    }

    /// Mutable access to the module, for edits the rewriter does not wrap.
    pub fn module_mut(&mut self) -> &mut Module {
        self.changed = true;
        self.m
    }

    /// Creates an instruction.
    pub fn add(&mut self, comp: CompId, inst: NewInst) -> InstId {
        self.changed = true;
        self.m.push_inst(comp, inst)
    }

    /// Forwards every use of `old` (operands, roots, control edges) to `new` and tombstones `old`.
    pub fn replace_all_uses(&mut self, old: InstId, new: InstId) {
        if old == new {
            return;
        }
        self.changed = true;
        self.forward.insert(old, new);
        self.m.remove_inst(old);
    }

    /// Tombstones `id` (it must have no users left).
    pub fn remove(&mut self, id: InstId) {
        self.changed = true;
        self.m.remove_inst(id);
    }

    /// Replaces the operands of `id`.
    pub fn set_operands(&mut self, id: InstId, ops: &[InstId]) {
        self.changed = true;
        self.m.set_operands(id, ops);
    }

    /// Where `id` is forwarded to once edits resolve (itself when not forwarded).
    pub fn resolve(&self, mut id: InstId) -> InstId {
        let mut hops = 0;
        while let Some(&n) = self.forward.get(&id) {
            id = n;
            hops += 1;
            if hops > self.forward.len() {
                break;
            }
        }
        id
    }

    /// Applies forwarding, bumps the epoch if anything changed, and says whether it did.
    pub fn finish(self) -> bool {
        if !self.forward.is_empty() {
            // A dense old-to-new table: one array read per operand in the sweep (the sweep is
            // linear in the module anyway, and hashing every operand costs more).
            let cap = self.m.opcode.len();
            let mut resolved: Vec<InstId> = (0..cap).map(InstId::new).collect();
            for &k in self.forward.keys() {
                if k.index() < cap {
                    resolved[k.index()] = self.resolve(k);
                }
            }
            let map = |i: InstId| {
                if i.index() < cap {
                    resolved[i.index()]
                } else {
                    i
                }
            };
            let m = &mut *self.m;
            for op in m.operand_pool.iter_mut() {
                *op = map(*op);
            }
            for c in m.comps.iter_mut() {
                c.root = map(c.root);
            }
            for (_, v) in m.attr_pool.iter_mut() {
                if let AttrValue::Insts(is) = v {
                    for i in is.iter_mut() {
                        *i = map(*i);
                    }
                }
            }
        }
        if self.changed {
            self.m.epoch += 1;
        }
        self.changed
    }
}
