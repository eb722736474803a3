package dev.hyspec.backend.cuda;

import jcuda.driver.CUevent;

/**
 * Device time of the work issued between {@link #start()} and {@link #stopMillis()}, measured by two
 * CUDA events on the backend's stream: what the GPU spent, including any time it sat idle waiting
 * for the host to issue the next launch. To time kernels rather than launches, queue longer work
 * ahead of {@link #start()} so the launches pile up behind it, and check {@link #startPending()}
 * after issuing them.
 */
public final class EventTimer {
    private final CudaRuntime rt;
    private final CUevent start;
    private final CUevent stop;

    EventTimer(CudaRuntime rt) {
        this.rt = rt;
        this.start = rt.newEvent();
        this.stop = rt.newEvent();
    }

    /** Marks the start, after all work issued so far. */
    public void start() {
        rt.record(start);
    }

    /**
     * True while the device has not reached the start mark: everything issued since {@link #start()}
     * is still queued, so it will run back to back, unhindered by the host's launch cost.
     */
    public boolean startPending() {
        return !rt.reached(start);
    }

    /** Marks the end after all work issued so far, waits for it, and returns the device milliseconds since the start. */
    public double stopMillis() {
        rt.record(stop);
        return rt.elapsedMillis(start, stop);
    }
}
