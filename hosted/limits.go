package hosted

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/switchboard-mcp/switchboard"
	"github.com/switchboard-mcp/switchboard/engine"
)

// A hosted server's resource_limits are read here and nowhere else: from
// the API, the CLI, the servers file and stored rows alike. Each is a JSON
// number or a string (switchboard.Quantity keeps the text). Sizes read as
// Docker reads them: k, m, g and t are powers of 1024 whatever their case
// and whether "i" or "b" follows ("1G" = "1g" = "1GiB" = "1gb" = 2^30
// bytes), with one difference: Docker also takes "p" (no host has that
// much) and an "i" or "b" without a unit.

// Bounds of the limits.
const (
	minNanoCPUs    = 10_000_000 // 0.01 cores: the engine refuses less
	minMemoryBytes = 6 << 20    // the engine refuses less
	minDiskBytes   = 1 << 20
)

var (
	cpuText  = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$`)
	sizeText = regexp.MustCompile(`(?i)^([0-9]+)(\.[0-9]+)? ?(?:([kmgt])i?b?|b)?$`)
	unitBits = map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
)

// ParseCPU reads a CPU limit in cores, written as a JSON number or a
// decimal string ("1", "0.5", "2.25"), into nano-CPUs (1e9 a core).
// Errors wrap switchboard.ErrInvalid and say what is wrong with the text:
// not a number, not more than 0, or too large to count in nano-CPUs.
func ParseCPU(q switchboard.Quantity) (int64, error) {
	s := strings.TrimSpace(string(q))
	if strings.HasPrefix(s, "-") {
		return 0, invalid("%s is negative", quote(q))
	}
	if !cpuText.MatchString(s) {
		return 0, invalid("%s is not a number of cores", quote(q))
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f*1e9 >= math.MaxInt64 {
		return 0, invalid("%s is too large", quote(q))
	}
	n := int64(math.Round(f * 1e9))
	if n <= 0 {
		return 0, invalid("%s must be more than 0", quote(q))
	}
	return n, nil
}

// ParseSize reads a size into bytes: a JSON number or a string of bytes
// ("1048576"), or a string with a unit k, m, g or t, powers of 1024 in any
// case, optionally followed by "i" and/or "b" ("512m", "1G", "512Mi",
// "1.5g", "64KiB"). Errors wrap switchboard.ErrInvalid and say what is
// wrong with the text: not a size, not more than 0, or more bytes than an
// int64 holds.
func ParseSize(q switchboard.Quantity) (int64, error) {
	s := strings.TrimSpace(string(q))
	if strings.HasPrefix(s, "-") {
		return 0, invalid("%s is negative", quote(q))
	}
	m := sizeText.FindStringSubmatch(s)
	if m == nil {
		return 0, invalid("%s is not a size", quote(q))
	}
	bits := unitBits[strings.ToLower(m[3])]
	whole, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || whole > math.MaxInt64>>bits {
		return 0, invalid("%s is too large", quote(q))
	}
	n := whole << bits
	if m[2] != "" {
		frac, _ := strconv.ParseFloat("0"+m[2], 64) // the pattern makes it a decimal in [0, 1)
		part := int64(frac * float64(int64(1)<<bits))
		if n > math.MaxInt64-part {
			return 0, invalid("%s is too large", quote(q))
		}
		n += part
	}
	if n <= 0 {
		return 0, invalid("%s must be more than 0", quote(q))
	}
	return n, nil
}

// quote shows a written quantity in a message: a number as it is, any
// other text quoted and clipped.
func quote(q switchboard.Quantity) string {
	b, _ := q.MarshalJSON()
	return switchboard.Clip(string(b))
}

// limitField is one field of resource_limits: how it reads, its bounds
// and what to write instead of a wrong value.
type limitField struct {
	name   string
	parse  func(switchboard.Quantity) (int64, error)
	min    int64
	minMsg string
	def    int64
	advice string
}

var (
	cpuField = limitField{name: "cpu", parse: ParseCPU, min: minNanoCPUs, minMsg: "0.01 cores, the engine's minimum", def: DefaultCPU * 1e9,
		advice: `a number of cores such as 0.5 or 2 (or the string "0.5"), or leave cpu out for the default 0.5`}
	memoryField = limitField{name: "memory", parse: ParseSize, min: minMemoryBytes, minMsg: "6m, the engine's minimum", def: DefaultMemoryBytes,
		advice: `bytes as a number (536870912) or a size such as "256m" or "1g" (k, m, g, t are powers of 1024), or leave memory out for the default 512m`}
	diskField = limitField{name: "disk", parse: ParseSize, min: minDiskBytes, minMsg: "1m", def: DefaultDiskBytes,
		advice: `bytes as a number or a size such as "1g" (k, m, g, t are powers of 1024), or leave disk out for the default 1g`}
)

// read returns the field's value for server name as written in q, or its
// default when q is empty. Errors wrap switchboard.ErrInvalid and name the
// server and the field.
func (f limitField) read(name string, q switchboard.Quantity) (int64, error) {
	if q == "" {
		return f.def, nil
	}
	v, err := f.parse(q)
	if err != nil {
		return 0, invalid("hosted server %q: resource_limits.%s %s; write %s", name, f.name, switchboard.Message(err), f.advice)
	}
	if v < f.min {
		return 0, invalid("hosted server %q: resource_limits.%s %s is below %s; write %s", name, f.name, quote(q), f.minMsg, f.advice)
	}
	return v, nil
}

// parseLimits reads a registration's resource_limits, defaults for those
// not written.
func parseLimits(name string, l switchboard.HostedLimits) (nanoCPUs, memoryBytes, diskBytes int64, err error) {
	if nanoCPUs, err = cpuField.read(name, l.CPU); err != nil {
		return 0, 0, 0, err
	}
	if memoryBytes, err = memoryField.read(name, l.Memory); err != nil {
		return 0, 0, 0, err
	}
	if diskBytes, err = diskField.read(name, l.Disk); err != nil {
		return 0, 0, 0, err
	}
	return nanoCPUs, memoryBytes, diskBytes, nil
}

// fitsHost refuses a CPU or memory limit the registration wrote that is
// more than the engine's host has (a container that can never get it).
// The defaults are not checked: they are the gateway's, and Docker runs
// a container whose memory limit exceeds the host's. A figure the engine
// did not report (0) is not checked. Errors wrap switchboard.ErrInvalid
// and name the field and the host's figure.
func (p plan) fitsHost(info engine.Info) error {
	n, l := p.reg.Name, p.reg.Limits
	if l.CPU != "" && info.NCPU > 0 && p.nanoCPUs > int64(info.NCPU)*1e9 {
		return invalid("hosted server %q: resource_limits.cpu %s is more than the Docker engine's host has (%d CPUs); write at most %d", n, quote(l.CPU), info.NCPU, info.NCPU)
	}
	if l.Memory != "" && info.MemTotal > 0 && p.memoryBytes > info.MemTotal {
		return invalid("hosted server %q: resource_limits.memory %s (%s) is more than the Docker engine's host has (%s); write at most %q", n, quote(l.Memory), bytesText(p.memoryBytes), bytesText(info.MemTotal), sizeFloor(info.MemTotal))
	}
	return nil
}

// bytesText writes n bytes for a person: "512 MiB", "22.9 GiB", "1.0 EiB".
func bytesText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1<<10 {
		return fmt.Sprintf("%d bytes", n)
	}
	f, i := float64(n)/(1<<10), 0
	for f >= 1<<10 && i < len(units)-1 {
		f, i = f/(1<<10), i+1
	}
	if f == math.Trunc(f) {
		return fmt.Sprintf("%.0f %s", f, units[i])
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}

// sizeFloor is the largest whole size in g, m or k not above n bytes,
// as a limit to write.
func sizeFloor(n int64) string {
	for _, u := range []struct {
		suffix string
		bits   uint
	}{{"g", 30}, {"m", 20}, {"k", 10}} {
		if n >= 1<<u.bits {
			return strconv.FormatInt(n>>u.bits, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
