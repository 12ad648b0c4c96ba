/** The dashboard's entry point: styles, then the app. */
import { render } from "preact"
import { App } from "./App.tsx"
import "./styles.css"

render(<App />, document.getElementById("app")!)
