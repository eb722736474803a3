package dev.hyspec.tokenizer;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.interpret.Context;
import com.hubspot.jinjava.interpret.InterpreterFactory;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;

/** A Jinjava interpreter that prints booleans as Python does: {@code {{ true }}} gives {@code True}. */
final class PythonInterpreter extends JinjavaInterpreter {

    /** Makes Jinjava render with {@link PythonInterpreter}. */
    static final class Factory implements InterpreterFactory {
        @Override
        public JinjavaInterpreter newInstance(JinjavaInterpreter orig) {
            return new PythonInterpreter(orig);
        }

        @Override
        public JinjavaInterpreter newInstance(Jinjava application, Context context, JinjavaConfig renderConfig) {
            return new PythonInterpreter(application, context, renderConfig);
        }
    }

    private PythonInterpreter(Jinjava application, Context context, JinjavaConfig renderConfig) {
        super(application, context, renderConfig);
    }

    private PythonInterpreter(JinjavaInterpreter orig) {
        super(orig);
    }

    @Override
    public String getAsString(Object object) {
        if (object instanceof Boolean bool) {
            return bool ? "True" : "False";
        }
        return super.getAsString(object);
    }
}
