package dev.hyspec.api;

import java.util.List;

/**
 * Finds stop strings in streamed text (vLLM's stop-string handling): the text before the first
 * stop string is output, the stop string and everything after it are not. While streaming, the
 * last {@code longest − 1} characters are held back, since they may be the start of a stop string
 * that the next tokens complete.
 */
final class StopStrings {
    private final List<String> stops;
    private final int holdBack;
    private final StringBuilder text = new StringBuilder();
    private int released;
    private String matched;

    StopStrings(List<String> stops) {
        this.stops = List.copyOf(stops);
        this.holdBack = stops.stream().mapToInt(String::length).max().orElse(1) - 1;
    }

    /**
     * Adds generated text and returns what can be released now. After a stop string is found,
     * {@link #matched()} names it and nothing more is released.
     */
    String add(String piece) {
        if (matched != null) {
            return "";
        }
        int searchFrom = Math.max(0, text.length() - holdBack);
        text.append(piece);
        int best = -1;
        for (String s : stops) {
            int at = text.indexOf(s, searchFrom);
            if (at >= 0 && (best < 0 || at < best)) {
                best = at;
                matched = s;
            }
        }
        int end = best >= 0 ? best : Math.max(released, text.length() - holdBack);
        String out = text.substring(released, end);
        released = end;
        return out;
    }

    /** The text still held back; call once generation ends without a match. */
    String flush() {
        if (matched != null) {
            return "";
        }
        String out = text.substring(released);
        released = text.length();
        return out;
    }

    /** The stop string that ended the text, or null. */
    String matched() {
        return matched;
    }
}
