//! The structural check of protobuf bytes (see `crate::validate`) driven by the plans: field
//! lookups are table reads instead of descriptor queries. Any problem returns [`Bail`] and the
//! caller reruns the reference check, which names it.

use super::Bail;
use super::plan::{Card, Plans};
use crate::decode::{is_packable, packable_wire_type, read_val};
use crate::wire::{self, Reader};

type R<T> = Result<T, Bail>;

pub(crate) fn message(plans: &Plans, plan_idx: usize, bytes: &[u8], depth_left: usize) -> R<()> {
    if depth_left == 0 {
        return Err(Bail);
    }
    let plan = &plans.msgs[plan_idx];
    let mut r = Reader::new(bytes, 0);
    while !r.is_empty() {
        let (number, wt) = r.tag().map_err(|_| Bail)?;
        let Some(fi) = plan.by_number(number) else {
            r.skip(number, wt, depth_left).map_err(|_| Bail)?;
            continue;
        };
        let field = &plan.fields[fi];
        let checked = match field.message {
            Some(m) if wt == wire::LEN => {
                let (sub, _) = r.len_delimited().map_err(|_| Bail)?;
                message(plans, m, sub, depth_left - 1)?;
                true
            }
            Some(_) => false,
            None if field.card == Card::List && wt == wire::LEN && is_packable(&field.kind) => {
                let (packed, _) = r.len_delimited().map_err(|_| Bail)?;
                let mut p = Reader::new(packed, 0);
                let pwt = packable_wire_type(&field.kind);
                while !p.is_empty() {
                    read_val(&field.kind, pwt, &mut p).map_err(|_| Bail)?;
                }
                true
            }
            None => read_val(&field.kind, wt, &mut r)
                .map_err(|_| Bail)?
                .is_some(),
        };
        if !checked {
            // A known number with another wire type: an unknown field, as runtimes keep it.
            r.skip(number, wt, depth_left).map_err(|_| Bail)?;
        }
    }
    Ok(())
}
