//! What the direct encoder needs of an input format: objects, arrays, keys, scalars, and the
//! raw bytes of one value (handed to the reference path for well-known types).

use super::Bail;
use super::plan::{FieldPlan, MsgPlan};
use crate::scalar::Lit;

pub(crate) type R<T> = Result<T, Bail>;

pub(crate) trait Source<'a> {
    /// The reading state of one open object or array, kept by the caller (on its stack, so
    /// nesting allocates nothing): JSON's "no entry read yet", MessagePack's entries left.
    type Open;
    /// Enters an object (JSON `{`, a MessagePack map).
    fn object(&mut self) -> R<Self::Open>;
    /// The next key of the object `open` without escapes, or `None` at its end.
    fn next_key(&mut self, open: &mut Self::Open) -> R<Option<&'a [u8]>>;
    /// The next key of the current object resolved to a field of `plan`, or `None` at the
    /// object's end. `hint` (the field after the previous one) and the field after it are
    /// recognised by their pre-encoded key's words; any other key as `next_key` reads it,
    /// looked up by `MsgPlan::by_key`.
    fn next_field(
        &mut self,
        open: &mut Self::Open,
        plan: &MsgPlan,
        hint: usize,
    ) -> R<Option<usize>>;
    /// The next value written as scalar field `field` (tag and value; an implicit-presence
    /// default not at all unless `always`) if it has one of the common shapes the source
    /// reads straight into wire bytes; `Ok(false)`, nothing consumed or written, for any
    /// other, which the caller converts the general way ([`Source::scalar`]).
    fn plain_field(&mut self, field: &FieldPlan, always: bool, out: &mut Vec<u8>) -> R<bool>;
    /// Enters an array.
    fn array(&mut self) -> R<Self::Open>;
    /// True if another element of the array `open` follows (consumes the separator or end).
    fn next_element(&mut self, open: &mut Self::Open) -> R<bool>;
    /// True if the next value is null (not consumed).
    fn peek_null(&mut self) -> bool;
    /// Consumes a null.
    fn null(&mut self) -> R<()>;
    /// One scalar value; strings may borrow a scratch buffer.
    fn scalar(&mut self) -> R<Lit<'_>>;
    /// Skips one value and returns its bytes.
    fn capture(&mut self) -> R<&'a [u8]>;
    /// Parses captured bytes with the format's reference parser.
    fn tree(&self, bytes: &[u8], max_containers: usize) -> R<crate::tree::In>;
    /// After the root value: nothing but whitespace may follow.
    fn finish(&mut self) -> R<()>;
}
