//! Value pools the generator draws from: the edge values of every scalar kind, strings that
//! stress escaping and UTF-8, field-mask segments good and bad, garbage tails.

pub const I32_EDGES: &[i32] = &[
    0,
    1,
    -1,
    2,
    -2,
    63,
    64,
    127,
    128,
    -128,
    255,
    256,
    16_383,
    16_384,
    1 << 24,
    1_000_000,
    -1_000_000,
    i32::MAX,
    i32::MAX - 1,
    i32::MIN,
    i32::MIN + 1,
];

pub const I64_EDGES: &[i64] = &[
    0,
    1,
    -1,
    127,
    128,
    i64::MAX,
    i64::MAX - 1,
    i64::MIN,
    i64::MIN + 1,
    1 << 53,
    (1 << 53) + 1,
    -(1 << 53) - 1,
    i32::MAX as i64,
    i32::MAX as i64 + 1,
    i32::MIN as i64 - 1,
    u32::MAX as i64,
    1_718_000_000_000,
    999_999_999_999_999_999,
];

pub const U32_EDGES: &[u32] = &[0, 1, 127, 128, 255, 16_384, 1 << 31, u32::MAX, u32::MAX - 1];

pub const U64_EDGES: &[u64] = &[
    0,
    1,
    127,
    128,
    1 << 31,
    u32::MAX as u64,
    u32::MAX as u64 + 1,
    1 << 53,
    (1 << 53) + 1,
    i64::MAX as u64,
    i64::MAX as u64 + 1,
    u64::MAX,
    u64::MAX - 1,
];

/// Float32 bit patterns: zeros, NaNs with payloads and signs, infinities, extremes,
/// subnormals, integers around 2^24, powers of ten around the exponent-notation switch.
pub const F32_BITS: &[u32] = &[
    0x0000_0000, // 0
    0x8000_0000, // -0
    0x3F80_0000, // 1
    0xBF80_0000, // -1
    0x3DCC_CCCD, // 0.1
    0x3E99_999A, // 0.3
    0x3FC0_0000, // 1.5
    0x7FC0_0000, // NaN
    0xFFC0_0000, // -NaN
    0x7F80_0001, // signalling NaN
    0x7FFF_FFFF, // NaN, all payload bits
    0x7F80_0000, // inf
    0xFF80_0000, // -inf
    0x7F7F_FFFF, // max
    0xFF7F_FFFF, // min
    0x0080_0000, // min positive normal
    0x0000_0001, // min subnormal
    0x007F_FFFF, // max subnormal
    0x8000_0001, // -min subnormal
    0x3400_0000, // epsilon
    0x4B80_0000, // 16777216
    0x4B80_0001, // 16777218
    0x4B18_9680, // 1e7
    0x5015_02F9, // 1e10
    0x60AD_78EC, // 1e20
    0x6258_D727, // 1e21
    0x6407_8678, // 1e22
    0x33D6_BF95, // 1e-7
    0x3586_37BD, // 1e-6
    0x47F1_2065, // 123456.79
    0x42C8_0000, // 100
];

/// Float64 bit patterns, as for float32.
pub const F64_BITS: &[u64] = &[
    0x0000_0000_0000_0000, // 0
    0x8000_0000_0000_0000, // -0
    0x3FF0_0000_0000_0000, // 1
    0xBFF0_0000_0000_0000, // -1
    0x3FB9_9999_9999_999A, // 0.1
    0x3FC9_9999_9999_999A, // 0.2
    0x3FD3_3333_3333_3334, // 0.30000000000000004
    0x3FF8_0000_0000_0000, // 1.5
    0x7FF8_0000_0000_0000, // NaN
    0xFFF8_0000_0000_0000, // -NaN
    0x7FF0_0000_0000_0001, // signalling NaN
    0x7FF8_0000_0000_0001, // NaN with payload
    0x7FF0_0000_0000_0000, // inf
    0xFFF0_0000_0000_0000, // -inf
    0x7FEF_FFFF_FFFF_FFFF, // max
    0xFFEF_FFFF_FFFF_FFFF, // min
    0x0010_0000_0000_0000, // min positive normal
    0x0000_0000_0000_0001, // min subnormal 5e-324
    0x000F_FFFF_FFFF_FFFF, // max subnormal
    0x8000_0000_0000_0001, // -5e-324
    0x3CB0_0000_0000_0000, // epsilon
    0x4340_0000_0000_0000, // 2^53
    0x4340_0000_0000_0001, // 2^53 + 2
    0x430C_6BF5_2634_0000, // 1e15
    0x4341_C379_37E0_8000, // 1e16
    0x4376_3457_85D8_A000, // 1e17
    0x4415_AF1D_78B5_8C40, // 1e20
    0x444B_1AE4_D6E2_EF50, // 1e21
    0x4480_F0CF_064D_D592, // 1e22
    0x3EE4_F8B5_88E3_68F1, // 1e-5
    0x3EB0_C6F7_A0B5_ED8D, // 1e-6
    0x3E7A_D7F2_9ABC_AF48, // 1e-7
    0x419D_6F34_547D_F3B6, // 123456789.123
    0x47EF_FFFF_E000_0000, // float32 max as double
    0x47EF_FFFF_F000_0000, // rounds to float32 infinity
    0x41F0_0000_0000_0000, // 2^32
    0x54B2_49AD_2594_C37D, // 1e100
    0x7E37_E43C_8800_759C, // 1e300
];

pub const STRINGS: &[&str] = &[
    "",
    "a",
    "hello",
    "hello world",
    "\u{e9}",
    "\u{f1}and\u{fa}",
    "\u{65e5}\u{672c}\u{8a9e}",
    "\u{1F600}",
    "\u{1D11E} clef",
    "a\u{1F600}b",
    "\0",
    "\u{1}\u{1f}",
    "\u{7f}",
    "\"",
    "\\",
    "\"quoted\" \\ back",
    "\n\r\t\u{8}\u{c}",
    "</script>",
    "\u{2028}\u{2029}",
    "\u{feff}",
    "\u{fffd}",
    "\u{10ffff}",
    "\u{d7ff}\u{e000}",
    "COLOR_RED",
    "true",
    "null",
    "123",
    "-0",
    "1e3",
    "NaN",
    "Infinity",
    "  spaced  ",
    "f_int32",
    "fInt32",
    "@type",
    "value",
];

/// Snake-case FieldMask path segments that render (`_` followed by a lowercase letter).
pub const MASK_SEGMENTS: &[&str] = &[
    "f_int32",
    "foo_bar",
    "a",
    "x2y",
    "inner_field_name",
    "f_nested",
    "value",
    "a_b_c",
    "map_string_nested",
    "by_name",
    "_leading",
    "\u{e9}t\u{e9}",
];

/// FieldMask path segments that cannot be rendered.
pub const MASK_BAD_SEGMENTS: &[&str] = &["fooBar", "foo__bar", "trailing_", "field_2_x", "A"];

/// Garbage appended to otherwise well-formed wire data.
pub const BAD_TAILS: &[&[u8]] = &[
    &[0x00],             // field number 0
    &[0x07],             // wire type 7
    &[0x0e],             // wire type 6
    &[0x0c],             // stray end-group
    &[0x0b],             // unterminated group
    &[0x0b, 0x08, 0x01], // unterminated group
    &[0x80],             // truncated varint
    &[
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ], // 11-byte varint
    &[
        0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
    ], // 10th byte > 1
    &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f], // huge length
    &[0xf8, 0xff, 0xff, 0xff, 0x7f], // field number > 2^29-1
    &[0x0d, 0x01, 0x02], // truncated fixed32
    &[0x09, 0x01],       // truncated fixed64
];
