package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Dist is sysbench's choice of random-number distribution for ids.
type Dist struct {
	Kind     string  // uniform, gaussian, special, pareto or zipfian
	SpecIter int     // --rand-spec-iter (12)
	SpecPct  int     // --rand-spec-pct (1)
	SpecRes  int     // --rand-spec-res (75)
	ParetoH  float64 // --rand-pareto-h (0.2)
	ZipfExp  float64 // --rand-zipfian-exp (0.8)
}

// DefaultDist is sysbench 1.0's default: special with its default parameters.
func DefaultDist() Dist {
	return Dist{Kind: "special", SpecIter: 12, SpecPct: 1, SpecRes: 75, ParetoH: 0.2, ZipfExp: 0.8}
}

// Validate says what is wrong with d's parameters, in terms of the flags
// that set them (synth's and prepare's alike: no command is named).
func (d Dist) Validate() error {
	switch d.Kind {
	case "uniform", "gaussian", "special", "pareto", "zipfian":
	default:
		return fmt.Errorf("--rand-type %q: want uniform, gaussian, special, pareto or zipfian", d.Kind)
	}
	switch {
	case d.SpecIter < 1:
		return fmt.Errorf("--rand-spec-iter must be at least 1")
	case d.SpecPct < 0 || d.SpecPct > 100:
		return fmt.Errorf("--rand-spec-pct must be 0..100")
	case d.SpecRes < 0 || d.SpecRes >= 100:
		return fmt.Errorf("--rand-spec-res must be 0..99")
	case d.ParetoH <= 0 || d.ParetoH >= 1:
		return fmt.Errorf("--rand-pareto-h must be in (0, 1)")
	case d.ZipfExp < 0:
		return fmt.Errorf("--rand-zipfian-exp must be >= 0")
	}
	return nil
}

// Rand draws numbers the way sysbench's sb_rand.c does, from a seeded PCG
// (sysbench's own generator is seeded from the clock, so its stream cannot
// be matched; its distributions can).
type Rand struct {
	r    *rand.Rand
	d    Dist
	zipf zipfState
}

// NewRand returns a generator for d seeded with seed and stream.
func NewRand(d Dist, seed, stream uint64) *Rand {
	g := &Rand{r: rand.New(rand.NewPCG(seed, stream)), d: d}
	g.zipf = newZipf(d.ZipfExp)
	return g
}

// Float returns a uniform double in [0, 1).
func (g *Rand) Float() float64 { return g.r.Float64() }

// Uniform is sb_rand_uniform: a + U[0,1) * (b - a + 1).
func (g *Rand) Uniform(a, b uint32) uint32 {
	return a + uint32(g.Float()*float64(b-a+1))
}

// Default draws from the configured distribution (sysbench.rand.default).
func (g *Rand) Default(a, b uint32) uint32 {
	switch g.d.Kind {
	case "uniform":
		return g.Uniform(a, b)
	case "gaussian":
		return g.Gaussian(a, b)
	case "pareto":
		return g.Pareto(a, b)
	case "zipfian":
		return g.Zipfian(a, b)
	}
	return g.Special(a, b)
}

// Gaussian is sb_rand_gaussian: the mean of SpecIter uniforms over the range.
func (g *Rand) Gaussian(a, b uint32) uint32 {
	t := float64(b - a + 1)
	var sum float64
	for i := 0; i < g.d.SpecIter; i++ {
		sum += g.Float() * t
	}
	return a + uint32(sum/float64(g.d.SpecIter))
}

// Special is sb_rand_special: SpecRes percent of the values fall uniformly
// in the SpecPct percent of the range around its centre; the rest are
// gaussian over the whole range.
func (g *Rand) Special(a, b uint32) uint32 {
	t := float64(b - a)
	rangeSize := t * 100.0 / float64(100-g.d.SpecRes)
	rnd := g.Float()
	if rnd*rangeSize < t {
		var sum float64
		for i := 0; i < g.d.SpecIter; i++ {
			sum += g.Float()
		}
		return a + uint32(sum*t/float64(g.d.SpecIter))
	}
	d := t * float64(g.d.SpecPct) / 100.0
	res := rnd * (d + 1)
	res += t/2 - t*float64(g.d.SpecPct)/200.0
	return a + uint32(res)
}

// Pareto is sb_rand_pareto with shape h.
func (g *Rand) Pareto(a, b uint32) uint32 {
	power := math.Log(g.d.ParetoH) / math.Log(1-g.d.ParetoH)
	return a + uint32(float64(b-a+1)*math.Pow(g.Float(), power))
}

// Zipfian draws from a bounded Zipf distribution with exponent ZipfExp, by
// rejection-inversion (Hörmann and Derflinger, 1996), as sysbench 1.1 does.
func (g *Rand) Zipfian(a, b uint32) uint32 {
	return a + g.zipf.sample(g, b-a+1) - 1
}

type zipfState struct {
	e, s, hx1 float64
}

func newZipf(e float64) zipfState {
	z := zipfState{e: e}
	z.s = 2 - z.hInv(z.hInt(2.5)-z.h(2))
	z.hx1 = z.hInt(1.5) - 1
	return z
}

// hInt is H(x) = (x^(1-e) - 1) / (1-e), or log(x) for e = 1.
func (z zipfState) hInt(x float64) float64 {
	lx := math.Log(x)
	return expm1Over((1-z.e)*lx) * lx
}

func (z zipfState) h(x float64) float64 { return math.Exp(-z.e * math.Log(x)) }

func (z zipfState) hInv(x float64) float64 {
	t := max(x*(1-z.e), -1)
	return math.Exp(log1pOver(t) * x)
}

// log1pOver is log(1+x)/x; expm1Over is (exp(x)-1)/x; both defined at 0.
func log1pOver(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Log1p(x) / x
	}
	return 1 - x*(0.5-x*(1.0/3-0.25*x))
}

func expm1Over(x float64) float64 {
	if math.Abs(x) > 1e-8 {
		return math.Expm1(x) / x
	}
	return 1 + x*0.5*(1+x/3*(1+0.25*x))
}

// sample returns k in [1, n] with P(k) proportional to 1/k^e.
func (z zipfState) sample(g *Rand, n uint32) uint32 {
	hn := z.hInt(float64(n) + 0.5)
	for {
		u := hn + g.Float()*(z.hx1-hn)
		x := z.hInv(u)
		k := uint32(x + 0.5)
		if k < 1 {
			k = 1
		} else if k > n {
			k = n
		}
		if float64(k)-x <= z.s || u >= z.hInt(float64(k)+0.5)-z.h(float64(k)) {
			return k
		}
	}
}

// String fills template: '#' becomes a random digit, '@' a random lower-case
// letter (sb_rand_str). Digits come eighteen at a time from one 64-bit value
// below 18·10^18 (larger ones are drawn again, 2.4% of them), so each digit
// is exactly uniform; this makes loading rows several times cheaper.
func (g *Rand) String(dst []byte, template string) []byte {
	var bits uint64
	left := 0
	for i := 0; i < len(template); i++ {
		switch template[i] {
		case '#':
			if left == 0 {
				const limit = 18_000_000_000_000_000_000
				for bits = g.r.Uint64(); bits >= limit; bits = g.r.Uint64() {
				}
				left = 18
			}
			dst = append(dst, byte('0'+bits%10))
			bits /= 10
			left--
		case '@':
			dst = append(dst, byte(g.Uniform('a', 'z')))
		default:
			dst = append(dst, template[i])
		}
	}
	return dst
}

// Unique returns values of a permutation of the uint32 range, as
// sysbench.rand.unique does (no repeats until 2^32 draws).
type Unique struct{ index, offset uint32 }

// NewUnique seeds the sequence.
func NewUnique(seed uint64) *Unique {
	return &Unique{
		index:  permute(permute(uint32(seed)) + 0x682f0161),
		offset: permute(permute(uint32(seed>>32)) + 0x46790905),
	}
}

// Next returns the next value.
func (u *Unique) Next() uint32 {
	i := u.index
	u.index++
	return permute((permute(i) + u.offset) ^ 0x5bf03635)
}

func permute(x uint32) uint32 {
	const prime = 4294967291
	if x >= prime {
		return x
	}
	r := uint32(uint64(x) * uint64(x) % prime)
	if x <= prime/2 {
		return r
	}
	return prime - r
}
