package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gdnjit/gdn/driver"
	"github.com/gdnjit/gdn/internal/buildinfo"
	"github.com/gdnjit/gdn/jit"
)

func init() {
	register("info", "show the GPU, the CUDA driver, NVRTC and the kernel cache", runInfo)
}

func runInfo(args []string) error {
	fs := newFlags("info", "[--cache-dir DIR] [--sms N]")
	cacheDir := fs.String("cache-dir", "", "disk cache folder (default: $"+jit.CacheDirEnv+", else the user cache folder's gdn/kernels)")
	sms := fs.Int("sms", 0, smsFlagHelp)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *sms < 0 {
		return fmt.Errorf("--sms %d: want 0 (the whole GPU) or a count of SMs", *sms)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	row := func(k, format string, a ...any) {
		for _, line := range strings.Split(fmt.Sprintf(format, a...), "\n") {
			fmt.Fprintf(tw, "%s\t%s\n", k, line)
			k = ""
		}
	}

	row("gdn", "%s", strings.TrimPrefix(buildinfo.Line("gdn"), "gdn "))
	var dev *driver.DeviceInfo
	if ctx, err := driver.OpenSMs(0, *sms); err != nil {
		var e *driver.SMCountError
		if errors.As(err, &e) {
			return fmt.Errorf("--sms %d: the GPU has %d SMs", e.Asked, e.Have)
		}
		row("device", "no CUDA device: %v", err)
	} else {
		info := ctx.Info()
		dev = &info
		count, _ := driver.DeviceCount()
		row("device", "GPU %d of %d: %s, compute capability %d.%d", info.Ordinal, count, info.Name, info.Major, info.Minor)
		row("", "%d SMs, %s memory, %s L2, %s shared memory per block (opt-in), %d MHz",
			info.DeviceSMs, size(int64(info.TotalMem)), size(int64(info.L2Bytes)), size(int64(info.MaxSharedPerBlockOptin)), info.ClockKHz/1000)
		if line := smsLine(info); line != "" {
			row("SMs", "%s", line)
		}
		v := info.DriverVersion
		row("driver", "CUDA %d.%d (%d)", v/1000, v%1000/10, v)
		ctx.Close()
	}

	if n, err := jit.LoadNVRTC(); err != nil {
		row("NVRTC", "not found: %v", err)
	} else {
		major, minor := n.Version()
		row("NVRTC", "%d.%d at %s", major, minor, n.Path())
		row("", "architectures %v", n.SupportedArchs())
		if dev != nil {
			if t, err := jit.TargetFor(dev.Major, dev.Minor, n); err != nil {
				row("target", "%v", err)
			} else {
				row("target", "%s", t)
			}
		}
	}

	src := "$" + jit.CacheDirEnv
	if *cacheDir != "" {
		src = "--cache-dir"
	} else if os.Getenv(jit.CacheDirEnv) == "" {
		src = "user cache folder"
	}
	if disk, err := jit.OpenDiskCache(*cacheDir); err != nil {
		row("cache", "%v", err)
	} else if files, bytes, err := disk.Size(); err != nil {
		row("cache", "%s (%s): %v", disk.Dir(), src, err)
	} else {
		row("cache", "%s (%s): %d entries, %s", disk.Dir(), src, files, size(bytes))
	}
	debug := "off"
	if jit.Debugging() {
		debug = "on"
	}
	row("jit debug", "%s (%s)", debug, jit.DebugEnv)
	return nil
}

// smsFlagHelp is the help of the --sms flag of info and bench.
const smsFlagHelp = "run on a slice of at least N SMs through a CUDA green context (rounded up to the driver's granularity, 8 on Hopper); 0: the whole GPU"

// smsLine describes the SM slice a context runs on ("asked 14, got 16 of
// 132 (green context)"), or why it runs on the whole GPU although a slice
// was asked; "" when none was asked.
func smsLine(info driver.DeviceInfo) string {
	switch {
	case info.SMsAsked == 0:
		return ""
	case info.Green:
		return fmt.Sprintf("asked %d, got %d of %d (green context)", info.SMsAsked, info.SMs, info.DeviceSMs)
	default:
		return fmt.Sprintf("asked %d, got %d: the whole GPU, green contexts unavailable (%s)", info.SMsAsked, info.SMs, info.GreenFallback)
	}
}

// size formats a byte count with a binary unit.
func size(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}
