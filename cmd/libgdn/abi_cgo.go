package main

/*
#define GDN_TYPES_ONLY
#include "gdn.h"
*/
import "C"

import "reflect"

// headerStructs are gdn.h's structs as cgo reads them (sizes and offsets
// from the C compiler), each beside its Go mirror, for
// TestABIMirrorsHeader; the index is the struct's gdn_struct value.
var headerStructs = []struct {
	name      string
	c, mirror reflect.Type
	which     int32
}{
	{"gdn_tensor", reflect.TypeOf(C.gdn_tensor{}), reflect.TypeOf(cTensor{}), C.GDN_STRUCT_TENSOR},
	{"gdn_options", reflect.TypeOf(C.gdn_options{}), reflect.TypeOf(cOptions{}), C.GDN_STRUCT_OPTIONS},
	{"gdn_pool", reflect.TypeOf(C.gdn_pool{}), reflect.TypeOf(cPool{}), C.GDN_STRUCT_POOL},
	{"gdn_seqs", reflect.TypeOf(C.gdn_seqs{}), reflect.TypeOf(cSeqs{}), C.GDN_STRUCT_SEQS},
	{"gdn_core_args", reflect.TypeOf(C.gdn_core_args{}), reflect.TypeOf(cCoreArgs{}), C.GDN_STRUCT_CORE_ARGS},
	{"gdn_full_args", reflect.TypeOf(C.gdn_full_args{}), reflect.TypeOf(cFullArgs{}), C.GDN_STRUCT_FULL_ARGS},
	{"gdn_decode_args", reflect.TypeOf(C.gdn_decode_args{}), reflect.TypeOf(cDecodeArgs{}), C.GDN_STRUCT_DECODE_ARGS},
}

// headerConstants are gdn.h's constants that the Go side repeats.
var headerConstants = map[string][2]int64{
	"GDN_ABI_VERSION":          {C.GDN_ABI_VERSION, abiVersion},
	"GDN_MAX_DIMS":             {C.GDN_MAX_DIMS, maxDims},
	"GDN_OK":                   {C.GDN_OK, int64(statusOK)},
	"GDN_ERR_INVALID_ARGUMENT": {C.GDN_ERR_INVALID_ARGUMENT, int64(statusInvalidArgument)},
	"GDN_ERR_CLOSED":           {C.GDN_ERR_CLOSED, int64(statusClosed)},
	"GDN_ERR_NO_CUDA":          {C.GDN_ERR_NO_CUDA, int64(statusNoCUDA)},
	"GDN_ERR_UNSUPPORTED_GPU":  {C.GDN_ERR_UNSUPPORTED_GPU, int64(statusUnsupportedGPU)},
	"GDN_ERR_OTHER":            {C.GDN_ERR_OTHER, int64(statusOther)},
	"GDN_BF16":                 {C.GDN_BF16, int64(dtypeBF16)},
	"GDN_FP16":                 {C.GDN_FP16, int64(dtypeFP16)},
	"GDN_FP32":                 {C.GDN_FP32, int64(dtypeFP32)},
	"GDN_INT32":                {C.GDN_INT32, int64(dtypeInt32)},
	"GDN_INT64":                {C.GDN_INT64, int64(dtypeInt64)},
	"GDN_LAYOUT_KV":            {C.GDN_LAYOUT_KV, int64(layoutKV)},
	"GDN_LAYOUT_VK":            {C.GDN_LAYOUT_VK, int64(layoutVK)},
}
