// m2v-probe: the tiled Mamba2 replay verify (mamba2_verify.cu) at the Nemotron-H-8B layer shape
// (H=128, P=64, N=128, G=8, float32 state and weights), timed by CUDA events against its floor (the
// bytes StateUpdateBench counts, at the device-copy bandwidth measured in the same run), each variant
// checked against the built kernel ("ref") on fresh inputs: max |a - b| / max |b| over the state, y and
// the history rows. A faster way to compare kernel variants than StateUpdateBench, whose figures
// (through the Java backend: staged tables, one allocation a row) stay the ones reported.
//
//   python3 scripts/device/m2v-probe/gen.py [OLD]   here: stages the variants in .device-m2v (see gen.py)
//   device tool: "bash .device-m2v/run.sh --T 6,4,1 --batches 32,64,256 [VARIANT...]", carry [".device-m2v"]
//
// Variants (all listed when none is named; "ref" always runs):
//   ref          the built kernel (m2_replay_verify_vk128[w4]_t{T}_f32)
//   old          the kernel at gen.py's OLD commit
//   flip         ref with the scalar warp's exponentials after its outputs (T >= 6, 8 warps)
//   old-fastexp, old-noout, old-noreplay, fastpre, fastscalar, fastall, noout, noreplay (T = 6):
//                diagnostics (float exponentials; no outputs; no replay), not the same results
#include "mamba2_verify.cu"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__device__ __forceinline__ float fast_dt(float r, float b, float lo, float hi) {
    return fminf(fmaxf(__logf(1.f + __expf(__fadd_rn(r, b))), lo), hi);
}
#define PEXPA(v) ((F & 1) ? __expf(v) : m2_exp(v))
#define PEXPB(v) ((F & 8) ? __expf(v) : m2_exp(v))
#define PDT(r, b, lo, hi) ((F & 8) ? fast_dt(r, b, lo, hi) : m2_dt(r, b, lo, hi))
#define PA(v) ((F & 1) ? -__expf(v) : m2_a(v))
#define POEXP(v) ((F & 1) ? __expf(v) : m2_exp(v))
#define PODT(r, b, lo, hi) ((F & 1) ? fast_dt(r, b, lo, hi) : m2_dt(r, b, lo, hi))
#define POA(v) ((F & 1) ? -__expf(v) : m2_a(v))
#include "pv_cur.inc"
#include "pv_flip.inc"
#include "pv_old.inc"

#define KARGS float *const *states, const float *const *prevs, const int *counts, const float *xBC, const float *dtRaw, \
              const float *dtBias, const float *aLog, const float *dd, float *const *nexts, float *y, int H, int P, int G, \
              float dtMin, float dtMax
#define KPASS states, prevs, counts, xBC, dtRaw, dtBias, aLog, dd, nexts, y, H, P, G, dtMin, dtMax
typedef void (*Kern)(KARGS);

template <int TT, int F>
__global__ void __launch_bounds__(256, 4) cur_kernel(KARGS) { pv_cur<TT, 8, float, F>(KPASS); }
template <int TT>
__global__ void __launch_bounds__(256, 4) flip_kernel(KARGS) { pv_flip<TT, 8, float, 0>(KPASS); }
template <int TT, int F>
__global__ void __launch_bounds__(256, 4) old_kernel(KARGS) { pv_old<TT, 8, float, F>(KPASS); }
template <int TT>
__global__ void __launch_bounds__(128, 8) old4_kernel(KARGS) { pv_old<TT, 4, float, 0>(KPASS); }

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static const int H = 128, P = 64, N = 128, G = 8;
static const int CONV = H * P + 2 * G * N, WIDTH = H * P + G * N + 2 * H;
static const long STATE = (long)H * P * N;   // floats per row

__global__ void fill(float* p, long n, unsigned seed, float lo, float hi) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        unsigned x = (unsigned)i * 2654435761u ^ seed * 0x9E3779B9u;
        x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
        p[i] = lo + (hi - lo) * (x >> 8) * (1.f / 16777216.f);
    }
}

static void rnd(float* p, long n, unsigned seed, float lo, float hi) {
    fill<<<1024, 256>>>(p, n, seed, lo, hi);
    CK(cudaGetLastError());
}

struct Set {
    int R, T;
    float *state, *prev, *next, *xBC, *dtRaw, *y;
    float **dStates, **dPrevs, **dNexts;
    int *dCounts, *dZero;
};

static float *gDtBias, *gALog, *gD;

static Set makeSet(int R, int T, unsigned seed) {
    Set s{R, T};
    CK(cudaMalloc(&s.state, 4L * R * STATE));
    CK(cudaMalloc(&s.prev, 4L * R * 8 * WIDTH));
    CK(cudaMalloc(&s.next, 4L * R * 8 * WIDTH));
    CK(cudaMalloc(&s.xBC, 4L * R * T * CONV));
    CK(cudaMalloc(&s.dtRaw, 4L * R * T * H));
    CK(cudaMalloc(&s.y, 4L * R * T * H * P));
    rnd(s.state, (long)R * STATE, seed, -0.5f, 0.5f);
    rnd(s.xBC, (long)R * T * CONV, seed + 1, -1.f, 1.f);
    rnd(s.dtRaw, (long)R * T * H, seed + 2, -4.f, -1.f);
    std::vector<float*> st(R), pv(R), nx(R);
    for (int r = 0; r < R; r++) {
        st[r] = s.state + (long)r * STATE;
        pv[r] = s.prev + (long)r * 8 * WIDTH;
        nx[r] = s.next + (long)r * 8 * WIDTH;
    }
    CK(cudaMalloc(&s.dStates, 8L * R));
    CK(cudaMalloc(&s.dPrevs, 8L * R));
    CK(cudaMalloc(&s.dNexts, 8L * R));
    CK(cudaMemcpy(s.dStates, st.data(), 8L * R, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.dPrevs, pv.data(), 8L * R, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.dNexts, nx.data(), 8L * R, cudaMemcpyHostToDevice));
    std::vector<int> c(R, T), z(R, 0);
    CK(cudaMalloc(&s.dCounts, 4L * R));
    CK(cudaMalloc(&s.dZero, 4L * R));
    CK(cudaMemcpy(s.dCounts, c.data(), 4L * R, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s.dZero, z.data(), 4L * R, cudaMemcpyHostToDevice));
    return s;
}

static void freeSet(Set& s) {
    for (void* p : {(void*)s.state, (void*)s.prev, (void*)s.next, (void*)s.xBC, (void*)s.dtRaw, (void*)s.y,
                    (void*)s.dStates, (void*)s.dPrevs, (void*)s.dNexts, (void*)s.dCounts, (void*)s.dZero})
        CK(cudaFree(p));
}

struct Variant {
    std::string name;
    Kern k;
    int threads, ptile;
};

static Kern refKernel(int T) {
    switch (T) {
        case 1: return m2_replay_verify_vk128_t1_f32;
        case 2: return m2_replay_verify_vk128w4_t2_f32;
        case 3: return m2_replay_verify_vk128w4_t3_f32;
        case 4: return m2_replay_verify_vk128w4_t4_f32;
        case 5: return m2_replay_verify_vk128_t5_f32;
        case 6: return m2_replay_verify_vk128_t6_f32;
        case 7: return m2_replay_verify_vk128_t7_f32;
        default: return m2_replay_verify_vk128_t8_f32;
    }
}

static void launch(const Variant& v, Set& s, bool prime) {
    dim3 grid(P / v.ptile, H, s.R);
    // priming: the history of the current inputs goes to prev (counts 0), as StateWorkload.primeHistory
    v.k<<<grid, v.threads>>>(s.dStates, (const float* const*)(prime ? s.dNexts : s.dPrevs), prime ? s.dZero : s.dCounts,
                              s.xBC, s.dtRaw, gDtBias, gALog, gD, prime ? s.dPrevs : s.dNexts, s.y, H, P, G, 0.001f,
                              INFINITY);
}

static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static double maxRel(const float* a, const float* b, long n) {
    double m = 0, d = 0;
    for (long i = 0; i < n; i++) {
        m = std::max(m, (double)fabsf(b[i]));
        d = std::max(d, (double)fabsf(a[i] - b[i]));
        if (std::isnan(a[i])) return INFINITY;
    }
    return d / std::max(m, 1e-30);
}

// The variant against the reference on one fresh set: state, y, next.
static std::string check(const Variant& v, const Variant& ref, int T) {
    int R = 4;
    Set a = makeSet(R, T, 777), b = makeSet(R, T, 777);
    // both sets get identical contents (same seed); prime both prev from their inputs with the reference
    launch(ref, a, true);
    launch(ref, b, true);
    rnd(a.state, (long)R * STATE, 991, -0.5f, 0.5f);
    rnd(b.state, (long)R * STATE, 991, -0.5f, 0.5f);
    CK(cudaMemset(a.y, 0xff, 4L * R * T * H * P));
    CK(cudaMemset(b.y, 0xff, 4L * R * T * H * P));
    CK(cudaMemset(a.next, 0xff, 4L * R * 8 * WIDTH));
    CK(cudaMemset(b.next, 0xff, 4L * R * 8 * WIDTH));
    // launch with prevs = prev (counts T): swap roles so nexts get written
    auto run = [&](const Variant& k, Set& s) {
        dim3 grid(P / k.ptile, H, s.R);
        k.k<<<grid, k.threads>>>(s.dStates, (const float* const*)s.dPrevs, s.dCounts, s.xBC, s.dtRaw, gDtBias, gALog, gD,
                                 s.dNexts, s.y, H, P, G, 0.001f, INFINITY);
        CK(cudaGetLastError());
    };
    run(v, a);
    run(ref, b);
    CK(cudaDeviceSynchronize());
    std::vector<float> ha(R * STATE), hb(R * STATE);
    char buf[256];
    CK(cudaMemcpy(ha.data(), a.state, 4L * R * STATE, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b.state, 4L * R * STATE, cudaMemcpyDeviceToHost));
    double es = maxRel(ha.data(), hb.data(), R * STATE);
    long ny = (long)R * T * H * P;
    CK(cudaMemcpy(ha.data(), a.y, 4 * ny, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), b.y, 4 * ny, cudaMemcpyDeviceToHost));
    double ey = maxRel(ha.data(), hb.data(), ny);
    double en = 0;
    for (int r = 0; r < R; r++) {
        long nn = (long)T * WIDTH;
        CK(cudaMemcpy(ha.data(), a.next + (long)r * 8 * WIDTH, 4 * nn, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb.data(), b.next + (long)r * 8 * WIDTH, 4 * nn, cudaMemcpyDeviceToHost));
        en = std::max(en, maxRel(ha.data(), hb.data(), nn));
    }
    snprintf(buf, sizeof buf, "state %.1e y %.1e next %.1e", es, ey, en);
    freeSet(a);
    freeSet(b);
    return buf;
}

int main(int argc, char** argv) {
    std::vector<int> batches = {32, 64, 128, 256};
    std::vector<int> Ts = {6};
    int runs = 60;
    std::vector<std::string> only;
    for (int i = 1; i < argc; i++) {
        auto list = [&](const char* s) {
            std::vector<int> v;
            for (const char* p = s; *p;) {
                v.push_back(atoi(p));
                while (*p && *p != ',') p++;
                if (*p) p++;
            }
            return v;
        };
        if (!strcmp(argv[i], "--batches")) batches = list(argv[++i]);
        else if (!strcmp(argv[i], "--T")) Ts = list(argv[++i]);
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[++i]);
        else only.push_back(argv[i]);
    }
    CK(cudaMalloc(&gDtBias, 4 * H));
    CK(cudaMalloc(&gALog, 4 * H));
    CK(cudaMalloc(&gD, 4 * H));
    rnd(gDtBias, H, 5, -0.5f, 0.5f);
    rnd(gALog, H, 6, 0.f, 2.7f);
    rnd(gD, H, 7, 0.5f, 1.5f);

    // copy bandwidth: 1 GiB copies, read + write counted
    const long CB = 1L << 30;
    float *ca, *cb;
    CK(cudaMalloc(&ca, CB));
    CK(cudaMalloc(&cb, CB));
    CK(cudaMemset(ca, 1, CB));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> ct;
    for (int i = 0; i < 12; i++) {
        CK(cudaEventRecord(e0));
        CK(cudaMemcpyAsync(cb, ca, CB, cudaMemcpyDeviceToDevice));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (i >= 2) ct.push_back(ms);
    }
    double bw = 2.0 * CB / (median(ct) * 1e-3);   // bytes/s
    printf("copy bandwidth %.0f GB/s\n", bw / 1e9);

    for (int T : Ts) {
        std::vector<Variant> vs;
        Variant ref{"ref", refKernel(T), T >= 5 || T == 1 ? 256 : 128, T >= 5 || T == 1 ? 32 : 16};
        vs.push_back(ref);
        static const Kern old8[] = {old_kernel<1, 0>, old_kernel<2, 0>, old_kernel<3, 0>, old_kernel<4, 0>,
                                    old_kernel<5, 0>, old_kernel<6, 0>, old_kernel<7, 0>, old_kernel<8, 0>};
        static const Kern old4[] = {old4_kernel<1>, old4_kernel<2>, old4_kernel<3>, old4_kernel<4>};
        if (T >= 5 || T == 1) vs.push_back({"old", old8[T - 1], 256, 32});
        else vs.push_back({"old", old4[T - 1], 128, 16});
        static const Kern flip8[] = {flip_kernel<6>, flip_kernel<7>, flip_kernel<8>};
        if (T >= 6) vs.push_back({"flip", flip8[T - 6], 256, 32});
        if (T == 6) {
            vs.push_back({"old-fastexp", old_kernel<6, 1>, 256, 32});
            vs.push_back({"old-noout", old_kernel<6, 2>, 256, 32});
            vs.push_back({"old-noreplay", old_kernel<6, 4>, 256, 32});
            vs.push_back({"fastpre", cur_kernel<6, 1>, 256, 32});
            vs.push_back({"fastscalar", cur_kernel<6, 8>, 256, 32});
            vs.push_back({"fastall", cur_kernel<6, 9>, 256, 32});
            vs.push_back({"noout", cur_kernel<6, 2>, 256, 32});
            vs.push_back({"noreplay", cur_kernel<6, 4>, 256, 32});
        }
        std::vector<Variant> sel;
        for (auto& v : vs)
            if (only.empty() || v.name == "ref" || std::find(only.begin(), only.end(), v.name) != only.end()) sel.push_back(v);
        for (auto& v : sel) {
            printf("T=%d %-20s check: %s\n", T, v.name.c_str(), v.name == "ref" ? "-" : check(v, ref, T).c_str());
        }
        printf("%-4s %-20s %6s %10s %10s %7s %9s\n", "T", "variant", "batch", "median us", "floor us", "ratio",
               "copy x");
        for (int R : batches) {
            long setBytes = 4L * R * STATE;
            int nsets = std::max(2L, ((256L << 20) + setBytes - 1) / setBytes);
            std::vector<Set> sets;
            for (int i = 0; i < nsets; i++) sets.push_back(makeSet(R, T, 100 + 17 * i));
            for (auto& s : sets) launch(ref, s, true);
            long floorBytes = 2L * 4 * R * STATE + 4L * R * T * (CONV + H + H * P) + 2L * 4 * R * T * WIDTH;
            double floorUs = floorBytes / bw * 1e6;
            // same-bytes copy
            std::vector<float> cc;
            for (int i = 0; i < 20; i++) {
                CK(cudaEventRecord(e0));
                for (long left = floorBytes / 2; left > 0; left -= CB)
                    CK(cudaMemcpyAsync(cb, ca, std::min(left, CB), cudaMemcpyDeviceToDevice));
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (i >= 4) cc.push_back(ms);
            }
            double copyUs = median(cc) * 1e3;
            for (auto& v : sel) {
                std::vector<cudaEvent_t> ev(2 * runs);
                for (auto& e : ev) CK(cudaEventCreate(&e));
                for (int i = 0; i < 6; i++) launch(v, sets[i % nsets], false);
                // queue behind a big copy so the launches run back to back
                CK(cudaMemcpyAsync(cb, ca, CB, cudaMemcpyDeviceToDevice));
                for (int i = 0; i < runs; i++) {
                    CK(cudaEventRecord(ev[2 * i]));
                    launch(v, sets[i % nsets], false);
                    CK(cudaEventRecord(ev[2 * i + 1]));
                }
                CK(cudaDeviceSynchronize());
                CK(cudaGetLastError());
                std::vector<float> t;
                for (int i = 0; i < runs; i++) {
                    float ms;
                    CK(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
                    t.push_back(ms * 1e3f);
                }
                for (auto& e : ev) CK(cudaEventDestroy(e));
                double m = median(t);
                printf("%-4d %-20s %6d %10.1f %10.1f %7.3f %9.3f\n", T, v.name.c_str(), R, m, floorUs, m / floorUs,
                       copyUs / floorUs);
                fflush(stdout);
            }
            for (auto& s : sets) freeSet(s);
        }
    }
    return 0;
}
