// Package lab holds kernel experiments: builds of a production kernel with
// some of its roles replaced, to measure what the rest costs. Production
// never imports it. A development build of gdn (go build -tags gdndev)
// runs an experiment's kernels in place of the production ones when
// GDN_LAB names it (package jit), so that the same binary times both:
//
//	GDN_LAB=fused_consumers gdn bench --full --cases q35_4kx8 --compare base.csv
//
// An experiment that leaves work out has wrong outputs by design, and only
// its time means something: it is marked WrongOutputs, and gdn bench notes
// its kernels' NaN outputs rather than failing on them. One that changes only where
// or when the same work is done (static_ring, pingpong) keeps production's
// outputs bit for bit, which a timing run checks beside the time
// (scripts/device-run.sh's lab step compares the outputs' digests).
package lab

import (
	"embed"
	"fmt"
	"sort"
	"strings"

	"github.com/gdnjit/gdn/kernsrc"
)

//go:embed *.cu
var files embed.FS

// EnvName names the environment variable a development build reads.
const EnvName = "GDN_LAB"

// Experiment is one lab kernel: a main file that includes the production
// headers and defines Roles, the roles the kernel's warpgroups play (a
// HopperRoles with some replaced), or Cfg, a template that wraps the
// variant's configuration (a HopperCfg with some constants replaced), for
// the Hopper variants Applies accepts. The kernel is always the production
// kernsrc.HopperKernel, so an experiment says only what it changes.
type Experiment struct {
	Name string
	File string
	// Uses are lab files whose text goes before File's, in order, in the
	// one program NVRTC compiles: an experiment built on another's roles
	// (NVRTC finds kernsrc's headers only, not the lab's files).
	Uses    []string
	Cfg     string // the configuration wrapper ("": the variant's own HopperCfg)
	Roles   string // the roles template ("": the production roles)
	Applies func(kernsrc.HopperCfg) bool
	Doc     string
	// WrongOutputs: the experiment leaves work out, so its outputs are
	// wrong by design (NaN and Inf among them) and only its time means
	// something; a timing run does not check them (gdn bench).
	WrongOutputs bool
}

var experiments = []Experiment{{
	Name:         "fused_consumers",
	File:         "fused_consumers.cu",
	Roles:        "ConsumersOnly",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "the fused kernel with producers that only pass each chunk along (the consumers' chain alone) (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:    "static_ring",
	File:    "static_ring.cu",
	Cfg:     "StaticRing",
	Applies: func(c kernsrc.HopperCfg) bool { return !c.Fused() },
	Doc:     "the Hopper kernels that keep their ring's barriers in the dynamic block with them in static shared memory, as the fused kernels have them",
}, {
	Name:    "pingpong",
	File:    "pingpong.cu",
	Roles:   "PingPong",
	Applies: twoGroups,
	Doc:     "the BV 128 kernels with their two consumer groups taking turns at the tensor pipe, a round of products each in turn (the same products: production's outputs)",
}, {
	Name:         "pingpong_consumers",
	File:         "pingpong_consumers.cu",
	Uses:         []string{"fused_consumers.cu", "pingpong.cu"},
	Roles:        "PingPongConsumersOnly",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "fused_consumers with pingpong's turns: the consumers' chain alone, its two groups taking turns at the tensor pipe (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "nodecay",
	File:         "nodecay.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "NoDecayConsumersOnly",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "fused_consumers without the state's decay: the consumers' chain alone, less the 64 multiplies a thread that a writer folding the decay into the gate factors would spare (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:    "lazy_decay",
	File:    "lazy_decay.cu",
	Roles:   "LazyDecayRoles",
	Applies: kernsrc.HopperCfg.Fused,
	Doc:     "the fused kernels with the state's decay folded into the gate factors: the consumers hold S / G and decay S only where G would fall under 1/16 or the walk ends (outputs differ from production's by rounding)",
}, {
	Name:         "noloads",
	File:         "noloads.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "NoLoadsRoles",
	Applies:      func(c kernsrc.HopperCfg) bool { return !c.Transfer },
	Doc:          "the Hopper kernels (not the transfer pass) whose refills copy nothing: every chunk after the first three runs on the tiles its stage holds, so the time is the chain's without waiting for q, k and v (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_consumers",
	File:         "noloads.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "NoLoadsConsumersOnly",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "fused_consumers whose refills copy nothing: the consumers' chain alone, without waiting for its copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_nodecay",
	File:         "noloads.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "NoLoadsNoDecay",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "nodecay whose refills copy nothing: the consumers' chain alone without the state's decay, without waiting for its copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "copies_only",
	File:         "copies_only.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "CopiesOnly",
	Applies:      kernsrc.HopperCfg.Fused,
	Doc:          "the fused kernels' copies alone (q, k and v in, o out, with the ring's protocol and no work): the rate this pattern and ring move the bytes at (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_nomerge",
	File:         "noloads.cu",
	Uses:         []string{"fused_consumers.cu"},
	Roles:        "NoLoadsNoMerge",
	Applies:      fusedNoNorm,
	Doc:          "noloads whose aux group leaves out the merge of A2's blocks below the diagonal: what the merge costs the chunk without copies (nothing, on the H100: it is off the chunk's path) (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_products_consumers",
	File:         "products_only.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "NoLoadsProductsConsumers",
	Applies:      fusedNoNorm,
	Doc:          "noloads_consumers whose producers do their tensor products (the aux group's K K^T, the converter's Q K^T) and nothing else: what the producers' share of the tensor pipe costs the consumers' chain (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_aux_only",
	File:         "one_producer.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "NoLoadsAuxOnly",
	Applies:      fusedNoNorm,
	Doc:          "noloads with the aux group's chunk alone (the converter passing each chunk along): its share of what the producers cost the chain (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_converter_only",
	File:         "one_producer.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "NoLoadsConverterOnly",
	Applies:      fusedNoNorm,
	Doc:          "noloads with the converter's chunk alone (the aux group passing each chunk along): its share of what the producers cost the chain (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "aux_only",
	File:         "one_producer.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "AuxOnly",
	Applies:      fusedNoNorm,
	Doc:          "the fused kernels without the norm, with the aux group's chunk alone (the converter passing each chunk along) and production's copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "converter_only",
	File:         "one_producer.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "ConverterOnly",
	Applies:      fusedNoNorm,
	Doc:          "the fused kernels without the norm, with the converter's chunk alone (the aux group passing each chunk along) and production's copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "noloads_early_ready",
	File:         "early_ready.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "NoLoadsEarlyReady",
	Applies:      fusedNoNorm,
	Doc:          "noloads whose producers mark a chunk ready when they start it and then do all their work on it: what the producers cost the chain once their latency is off it (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:         "early_ready",
	File:         "early_ready.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "EarlyReady",
	Applies:      fusedNoNorm,
	Doc:          "the fused kernels without the norm, whose producers mark a chunk ready when they start it, with production's copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:    "persistent",
	File:    "persistent.cu",
	Roles:   "Persistent",
	Applies: func(c kernsrc.HopperCfg) bool { return fusedNoNorm(c) && !c.States },
	Doc:     "the fused kernels without the norm, whose CTAs each walk a run of neighbouring sequences as one (packed sequences of one length, a multiple of 64), the next sequence's first chunks loaded and prepared under the last ones before it (the same products: production's outputs)",
}, {
	Name:    "q_first",
	File:    "q_first.cu",
	Uses:    []string{"fused_consumers.cu", "noloads.cu"},
	Roles:   "QFirst",
	Applies: fusedNoNorm,
	Doc:     "the fused kernels without the norm, whose converter turns Q to fp16 before its wait on the aux group's read of K, and only K after it (the same conversions: production's outputs)",
}, {
	Name:         "noloads_q_first",
	File:         "q_first.cu",
	Uses:         []string{"fused_consumers.cu", "noloads.cu"},
	Roles:        "NoLoadsQFirst",
	Applies:      fusedNoNorm,
	Doc:          "noloads with q_first's converter: Q to fp16 before the wait on the aux group's read of K, without copies (outputs wrong)",
	WrongOutputs: true,
}, {
	Name:    "split_full",
	File:    "split_full.cu",
	Roles:   "SplitFull",
	Applies: fusedNoNorm,
	Doc:     "the fused kernels without the norm, whose refills land K and Q on the stage's full and the value tiles on a barrier of their own, so that the producers start a chunk before its value tiles land (the same copies and products: production's outputs)",
}}

// fusedNoNorm: the fused kernels without the L2 norm (their converter
// builds P and converts K and Q; with the norm it normalises them).
func fusedNoNorm(c kernsrc.HopperCfg) bool {
	return c.Prep == kernsrc.PrepFusedNoNorm && c.Converters() == 1
}

// twoGroups: the variants with two consumer groups (BV 128), the core
// forward (every preparation) and the transfer pass.
func twoGroups(c kernsrc.HopperCfg) bool { return c.Consumers == 2 }

// Experiments lists the experiments by name.
func Experiments() []Experiment {
	out := append([]Experiment(nil), experiments...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the named experiment.
func Lookup(name string) (Experiment, error) {
	var names []string
	for _, e := range experiments {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return Experiment{}, fmt.Errorf("lab: no experiment %q (have %s)", name, strings.Join(names, ", "))
}

// Variant returns the experiment's build of v, named apart (v's name and
// the experiment's), or v itself when the experiment does not apply to it
// (another family, or a configuration it leaves alone).
func (e Experiment) Variant(v kernsrc.Variant) (kernsrc.Variant, error) {
	cfg, ok := kernsrc.HopperCfgOfVariant(v)
	if !ok || !e.Applies(cfg) {
		return v, nil
	}
	text, err := e.program()
	if err != nil {
		return v, fmt.Errorf("lab: %s: %w", e.Name, err)
	}
	args := strings.TrimSuffix(strings.TrimPrefix(v.Kernel, kernsrc.HopperKernel+"<"), ">")
	if e.Cfg != "" {
		args = e.Cfg + "<" + args + ">"
	}
	if e.Roles != "" {
		args += ", " + e.Roles
	}
	v.Name = v.Name + "_lab_" + e.Name
	v.File = "lab/" + e.File
	v.Text = text
	v.Kernel = kernsrc.HopperKernel + "<" + args + ">"
	v.Defines = append([]string(nil), v.Defines...)
	return v, nil
}

// program is the text NVRTC compiles: File's, after Uses' (each part marked
// with a #line of its file, so that NVRTC's messages name it).
func (e Experiment) program() (string, error) {
	if len(e.Uses) == 0 {
		b, err := files.ReadFile(e.File)
		return string(b), err
	}
	var sb strings.Builder
	for _, f := range append(append([]string(nil), e.Uses...), e.File) {
		b, err := files.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&sb, "#line 1 \"lab/%s\"\n%s\n", f, b)
	}
	return sb.String(), nil
}
